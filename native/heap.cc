// The one V8 call the serving process makes itself: a memory-reducing collection started at a
// moment clusterdns chooses (after a bulk load of cluster objects), instead of V8's memory
// reducer choosing one later under load (README "Node flags"). N-API has no such call, so
// this file speaks V8's C++ API; it is built with the same Node headers as the rest.
#include <v8.h>

extern "C" int cdns_memory_pressure(int level) {
  v8::Isolate *isolate = v8::Isolate::GetCurrent();
  if (isolate == nullptr) return -1;
  isolate->MemoryPressureNotification(level >= 2   ? v8::MemoryPressureLevel::kCritical
                                      : level == 1 ? v8::MemoryPressureLevel::kModerate
                                                   : v8::MemoryPressureLevel::kNone);
  return 0;
}
