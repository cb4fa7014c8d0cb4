// Must compile: an invoke-layer source including headers of its own layer and those below, the
// control that shows the failing probes fail for the direction only (tests/layering).
#include <seriema/fabric/runtime.hpp>
#include <seriema/invoke/invoke.hpp>
#include <seriema/transfer/transmitter.hpp>
