// SPDX-License-Identifier: MIT
#include "netns.hpp"

#include <fcntl.h>
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
