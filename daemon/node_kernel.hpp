// SPDX-License-Identifier: MIT
// What this node's kernel and interface give xaggd, as its log, `status` and the
// xagg_kernel_info metric report it (docs/KERNELS.md explains each).
#pragma once

#include <string>

namespace xagg::daemon {

struct NodeKernel {
    std::string release;           // uname -r
    std::string fastpath_variant;  // "pull" | "copy"; "" without a fast path (datapath = host)
    std::string jumbo_refusal;     // why jumbo chunks cannot be served here; "" when they can
};

}  // namespace xagg::daemon
