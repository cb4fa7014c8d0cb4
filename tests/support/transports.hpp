// Which UCX transports a multi-process test runs over, as UCX_TLS says.
#pragma once

#include <cstdlib>
#include <string>

namespace seriema::test {

// UCX_TLS names tcp and no shared-memory transport: same-machine memory does not map.
inline bool tcp_only() {
  const char* tls = std::getenv("UCX_TLS");
  return tls != nullptr && std::string(tls).find("tcp") != std::string::npos &&
         std::string(tls).find("sm") == std::string::npos &&
         std::string(tls).find("posix") == std::string::npos;
}

}  // namespace seriema::test
