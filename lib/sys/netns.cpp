// SPDX-License-Identifier: MIT
#include "lib/sys/netns.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <exception>
#include <system_error>
#include <thread>

namespace xagg::sys {

void enter_netns(const std::string &name)
{
    const std::string path = "/run/netns/" + name;
    // Already there (entered by whoever started us, e.g. scripts/xaggd-as-unit): nothing to do,
    // and nothing that needs CAP_SYS_ADMIN, which a daemon under its unit does not have.
    struct stat want {
    }, have{};
    if (stat(path.c_str(), &want) == 0 && stat("/proc/thread-self/ns/net", &have) == 0 &&
        want.st_dev == have.st_dev && want.st_ino == have.st_ino)
        return;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw std::system_error(errno, std::generic_category(),
                                "opening network namespace " + path);
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc != 0)
        throw std::system_error(err, std::generic_category(), "entering network namespace " + name);
}

void run_in_netns(const std::string &name, const std::function<void()> &fn)
{
    std::exception_ptr error;
    std::thread t([&] {
        try {
            enter_netns(name);
            fn();
        } catch (...) {
            error = std::current_exception();
        }
    });
    t.join();
    if (error)
        std::rethrow_exception(error);
}

}  // namespace xagg::sys
