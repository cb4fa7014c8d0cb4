// The containers module: distributed data structures partitioned over the worker threads of a
// job (docs/containers.md). Link seriema::containers.
#pragma once

#include <seriema/containers/any_thread.hpp>
#include <seriema/containers/array.hpp>
#include <seriema/containers/bag.hpp>
#include <seriema/containers/counting_set.hpp>
#include <seriema/containers/disjoint_set.hpp>
#include <seriema/containers/map.hpp>
#include <seriema/containers/set.hpp>
