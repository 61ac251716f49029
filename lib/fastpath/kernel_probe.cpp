// SPDX-License-Identifier: MIT
#include "lib/fastpath/kernel_probe.hpp"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include "lib/fastpath/bpf_log.hpp"

namespace xagg {

KernelOffers probe_kernel()
{
    KernelOffers offers;
    utsname u{};
    if (uname(&u) == 0)
        offers.release = u.release;
    // A kfunc is callable when the kernel's BTF describes it: what libbpf itself looks up when
    // it resolves the program's extern, so the probe and the load cannot disagree.
    LibraryLogCapture log;
    if (btf *vmlinux = btf__load_vmlinux_btf()) {
        offers.pull_data = btf__find_by_name_kind(vmlinux, "bpf_xdp_pull_data", BTF_KIND_FUNC) > 0;
        btf__free(vmlinux);
    }
    return offers;
}

xagg_fastpath_variant best_variant(const KernelOffers &kernel)
{
    return kernel.pull_data ? XAGG_VARIANT_PULL : XAGG_VARIANT_COPY;
}

std::string variant_unavailable(xagg_fastpath_variant variant, const KernelOffers &kernel)
{
    if (variant == XAGG_VARIANT_PULL && !kernel.pull_data)
        return "the pull variant needs bpf_xdp_pull_data (Linux 6.18); this kernel is " +
               kernel.release;
    return "";
}

const char *variant_name(xagg_fastpath_variant variant)
{
    return variant == XAGG_VARIANT_PULL ? "pull" : "copy";
}

std::optional<xagg_fastpath_variant> parse_variant(const std::string &name)
{
    if (name == "pull")
        return XAGG_VARIANT_PULL;
    if (name == "copy")
        return XAGG_VARIANT_COPY;
    return std::nullopt;
}

}  // namespace xagg
