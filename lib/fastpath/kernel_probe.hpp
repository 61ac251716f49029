// SPDX-License-Identifier: MIT
// What the running kernel offers the fast path, read from the kernel itself (uname and its BTF),
// so that the loader picks the variant that runs here (include/xagg/fastpath.h) and xaggd can say
// which it is. docs/KERNELS.md lists the kernels and what each gives.
#pragma once

#include <optional>
#include <string>

#include "xagg/fastpath.h"

namespace xagg {

struct KernelOffers {
    std::string release;     // uname -r
    bool pull_data = false;  // the kfunc bpf_xdp_pull_data (Linux 6.18)
};

// Reads them once per call (a few milliseconds: the kernel's BTF is parsed).
KernelOffers probe_kernel();

// The fastest exact variant that `kernel` can load.
xagg_fastpath_variant best_variant(const KernelOffers &kernel);
// Why `kernel` cannot run `variant`, or "" if it can.
std::string variant_unavailable(xagg_fastpath_variant variant, const KernelOffers &kernel);

// "pull" or "copy": the names config, logs, metrics and xaggctl use.
const char *variant_name(xagg_fastpath_variant variant);
std::optional<xagg_fastpath_variant> parse_variant(const std::string &name);

}  // namespace xagg
