// What keeps hone runnable on glibc 2.34 (RHEL 9, Ubuntu 22.04) although it is built on a newer one: the static
// libstdc++ (doc/building.md, "One binary") refers to arc4random (glibc 2.36) from std::random_device, whose object
// every program using exceptions pulls in. The link wraps that reference (-Wl,--wrap=arc4random) to this function,
// which draws from getrandom (glibc 2.25) instead. hone itself never uses std::random_device.
#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>

extern "C" uint32_t __wrap_arc4random(void) {
  uint32_t v = 0;
  for (;;) {
    const ssize_t n = getrandom(&v, sizeof v, 0);
    if (n == ssize_t(sizeof v)) return v;
    if (n < 0 && errno != EINTR) std::abort();  // arc4random cannot fail either: it aborts
  }
}
