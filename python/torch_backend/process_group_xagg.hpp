// SPDX-License-Identifier: MIT
// The torch.distributed backend "xagg" (docs/PYTHON.md): a c10d::ProcessGroup whose all_reduce
// of one float32 or int32 tensor with SUM or AVG goes through an xagg::Client, asynchronously,
// and which hands every other collective, dtype and op to a gloo process group it holds:
// explicitly, counted by kind, and logged the first time each kind is seen, never silently
// wrong. This is how torch-ucc and torch-ccl plug into PyTorch (a C++ extension registered with
// torch.distributed.Backend.register_backend; python/xagg/torch.py registers this one), so code
// that calls dist.all_reduce itself, and DDP without a comm hook, both go through xagg.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "xagg/client.hpp"

namespace xagg::torch_backend {

// What the process group was built with, beside the xagg client's own options.
struct Settings {
    // The job this group's rank 0 created for the run and deletes when the group is destroyed
    // (nullopt: the job was given, and outlives the group).
    std::optional<Aggregator> owned_job;
};

class ProcessGroupXagg : public c10d::ProcessGroup {
public:
    // Joins the job (ClientOptions) and keeps `delegate` for everything xagg does not sum.
    ProcessGroupXagg(int rank, int size, const ClientOptions &options,
                     c10::intrusive_ptr<c10d::ProcessGroup> delegate, Settings settings);
    ~ProcessGroupXagg() override;

    const std::string getBackendName() const override { return "xagg"; }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override;

    // Everything else: the delegate's, counted.
    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
        std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> allgather_coalesced(
        std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
        const c10d::AllgatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_split_sizes,
                                                 std::vector<int64_t> &input_split_sizes,
                                                 const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override;
    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst_rank,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src_rank,
                                        int tag) override;
    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
                                                 int tag) override;
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

    // All-reduces summed by xagg, and what went to the delegate, by kind ("broadcast",
    // "all_reduce: dtype Double", ...).
    uint64_t xagg_allreduces() const;
    std::map<std::string, uint64_t> delegated() const;
    const c10::intrusive_ptr<c10d::ProcessGroup> &delegate() const { return delegate_; }

private:
    struct Pending;
    // Why xagg cannot sum this all-reduce, or nullopt.
    static std::optional<std::string> why_not(const std::vector<at::Tensor> &tensors,
                                              const c10d::AllreduceOptions &opts);
    // Counts (and the first time, logs) a call handed to the delegate.
    void count_delegated(const std::string &kind);
    void complete_in_order();  // the completion thread

    c10::intrusive_ptr<c10d::ProcessGroup> delegate_;
    Settings settings_;
    std::unique_ptr<Client> client_;

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Pending>> pending_;
    bool stopping_ = false;
    uint64_t xagg_allreduces_ = 0;
    std::map<std::string, uint64_t> delegated_;
    std::thread completer_;
};

}  // namespace xagg::torch_backend
