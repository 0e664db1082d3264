#include "common/counters.h"

namespace vgpu::counters {

Cell g_cells[kCount];

}  // namespace vgpu::counters
