// SPDX-License-Identifier: MIT
// The main of the tests that load the fast path: `--variant=pull|copy` runs every test on that
// variant of the program (include/xagg/fastpath.h); without it, on the best the kernel offers.
// ctest runs each such binary once per variant this kernel can load, so that the copy variant,
// the one Linux 6.1-6.12 run, is tested on the newest kernel too.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "tests/support/fastpath_fixture.hpp"

namespace xagg::test {
std::optional<xagg_fastpath_variant> g_tested_variant;
}

int main(int argc, char **argv)
{
    testing::InitGoogleTest(&argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (std::strncmp(arg, "--variant=", 10) == 0) {
            xagg::test::g_tested_variant = xagg::parse_variant(arg + 10);
            if (xagg::test::g_tested_variant)
                continue;
        }
        std::fprintf(stderr, "%s: unknown argument %s (--variant=pull|copy)\n", argv[0], arg);
        return 2;
    }
    const xagg::KernelOffers kernel = xagg::probe_kernel();
    std::printf(
        "fast-path variant under test: %s (kernel %s)\n",
        xagg::variant_name(xagg::test::g_tested_variant.value_or(xagg::best_variant(kernel))),
        kernel.release.c_str());
    return RUN_ALL_TESTS();
}
