// Must not compile: a transfer-layer source including a fabric header (tests/layering).
#include <seriema/fabric/runtime.hpp>
