// Must not compile: a fabric-layer source including an invoke header (tests/layering).
#include <seriema/invoke/invoke.hpp>
