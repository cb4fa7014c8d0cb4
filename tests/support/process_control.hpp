// Stopping a peer process in multi-process tests (a stalled peer: SIGSTOP keeps it alive to UCX
// while it answers nothing): its state as the kernel shows it, and a stop that is seen to take.
#pragma once

#include <sys/types.h>

#include <csignal>

#include <chrono>
#include <exception>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace seriema::test {

// The state letter of process `pid` (/proc/<pid>/stat: 'T' stopped, 'Z' zombie), or '?' (gone).
inline char process_state(int pid) {
  std::string text;
  try {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    text.assign(std::istreambuf_iterator<char>(stat), std::istreambuf_iterator<char>());
  } catch (const std::exception&) {
    // A process that ends while its stat is read fails the read (ESRCH), and libstdc++'s filebuf
    // throws for that whatever the stream's exception mask: the process is gone.
    return '?';
  }
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ? '?' : text[paren + 2];
}

// Stops `pid` (SIGSTOP) and waits until the kernel shows it stopped, sending the signal again
// every 100 ms: under load a stop was seen not to take (the process went on running calls).
inline bool stop_process(int pid) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (::kill(pid, SIGSTOP) != 0) return false;
    for (int look = 0; look < 100; ++look) {
      if (process_state(pid) == 'T') return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return false;
}

}  // namespace seriema::test
