// SPDX-License-Identifier: MIT
// Child processes for integration tests: started with arguments (no shell), output to a file,
// waited for with a deadline, and killed if the test gives up on them.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace xagg::test {

class Process {
public:
    Process(const std::vector<std::string> &argv, const std::string &output_file)
        : output_(output_file)
    {
        const pid_t parent = getpid();
        pid_ = fork();
        if (pid_ < 0)
            throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            // A test that aborts (an uncaught exception, a crash) skips the destructor below:
            // the kernel kills the child then instead of leaving a daemon running. The signal
            // comes when the thread that forked exits, so Processes are made on the test's
            // own thread.
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)  // it died before prctl took effect
                _exit(127);
            FILE *out = std::fopen(output_file.c_str(), "w");
            if (out) {
                dup2(fileno(out), STDOUT_FILENO);
                dup2(fileno(out), STDERR_FILENO);
            }
            std::vector<char *> args;
            for (const auto &a : argv)
                args.push_back(const_cast<char *>(a.c_str()));
            args.push_back(nullptr);
            execv(args[0], args.data());
            _exit(127);
        }
    }
    ~Process()
    {
        if (pid_ > 0 && !exited_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    Process(const Process &) = delete;
    Process &operator=(const Process &) = delete;

    void signal(int sig) const { kill(pid_, sig); }
    pid_t pid() const { return pid_; }

    // Whether it has not exited yet (without reaping it: wait() still gets its status).
    bool running() const
    {
        siginfo_t info{};
        return !exited_ &&
               waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               info.si_pid == 0;
    }

    // Exit code, or -1 if it did not exit in time (it is then killed), or 128+N on signal N.
    int wait(std::chrono::milliseconds timeout)
    {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        int status = 0;
        while (std::chrono::steady_clock::now() < deadline) {
            pid_t r = waitpid(pid_, &status, WNOHANG);
            if (r == pid_) {
                exited_ = true;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        exited_ = true;
        return -1;
    }

    std::string output() const
    {
        std::ifstream in(output_);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }

private:
    std::string output_;
    pid_t pid_ = -1;
    bool exited_ = false;
};

inline std::string run_command(const std::string &cmd)
{
    std::string out;
    FILE *p = popen(("{ " + cmd + "; } 2>&1").c_str(), "r");
    if (!p)
        return out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
        out.append(buf, n);
    pclose(p);
    return out;
}

inline bool wait_for_file(const std::string &path, std::chrono::milliseconds timeout)
{
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (access(path.c_str(), F_OK) == 0)
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// The same, giving up as soon as `writer`, the process that would write the file, has exited.
inline bool wait_for_file_from(const Process &writer, const std::string &path,
                               std::chrono::milliseconds timeout)
{
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        if (access(path.c_str(), F_OK) == 0)
            return true;
        if (!writer.running())
            return access(path.c_str(), F_OK) == 0;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

}  // namespace xagg::test
