// Must not compile: a base-layer source including a transfer header (tests/layering).
#include <seriema/transfer/ucx.hpp>
