#include "common/malloc_tuning.h"

#include <malloc.h>

namespace dtrain {

void TuneMallocForBulkTransfers() {
  // Blocks up to 256 MB come from the heap, and up to 512 MB of free heap is kept.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

}  // namespace dtrain
