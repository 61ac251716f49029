// SPDX-License-Identifier: MIT
#include "python/torch_backend/process_group_xagg.hpp"

#include <ATen/ATen.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstdio>
#include <span>

namespace xagg::torch_backend {

// An all-reduce handed to the client, waiting for its result.
struct ProcessGroupXagg::Pending {
    AllReduce op;
    at::Tensor tensor;                  // the caller's
    at::Tensor host;                    // its pinned host copy, for a tensor not in host memory
    std::optional<c10::Stream> stream;  // the stream the caller's tensor is used on
    bool average = false;
    c10::intrusive_ptr<c10::ivalue::Future> future;
};

namespace {

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future()
{
    return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

// The Work of an all-reduce: its future's outcome, error included. Not Work::create_from_future:
// the wrapper it makes in torch 1.13 waits for the future but never looks at its error, so a
// failed all-reduce (aggregator unreachable, this worker evicted) returned from
// dist.all_reduce() as if it had succeeded, the tensor unsummed or summed in part.
class FutureWork : public c10d::Work {
public:
    explicit FutureWork(c10::intrusive_ptr<c10::ivalue::Future> future)
        : c10d::Work(-1, c10d::OpType::ALLREDUCE), future_(std::move(future))
    {
    }
    bool isCompleted() override { return future_->completed(); }
    bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
    std::exception_ptr exception() const override
    {
        return future_->completed() && future_->hasError() ? future_->exception_ptr() : nullptr;
    }
    std::vector<at::Tensor> result() override { return future_->value().toTensorVector(); }
    bool wait(std::chrono::milliseconds timeout = ::kNoTimeout) override
    {
        TORCH_CHECK(timeout == ::kNoTimeout, "xagg: Work::wait() with a timeout is not supported");
        future_->waitAndThrow();
        return true;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

private:
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<c10d::Work> future_work(c10::intrusive_ptr<c10::ivalue::Future> future)
{
    return c10::make_intrusive<FutureWork>(std::move(future));
}

// A Work that has already failed with `error` (so DDP and wait() see the exception).
c10::intrusive_ptr<c10d::Work> failed_work(std::exception_ptr error)
{
    auto future = tensor_list_future();
    future->setError(error);
    return future_work(future);
}

}  // namespace

ProcessGroupXagg::ProcessGroupXagg(int rank, int size, const ClientOptions &options,
                                   c10::intrusive_ptr<c10d::ProcessGroup> delegate,
                                   Settings settings)
    : c10d::ProcessGroup(rank, size),
      delegate_(std::move(delegate)),
      settings_(std::move(settings)),
      client_(std::make_unique<Client>(options))
{
    TORCH_CHECK(client_->workers() == static_cast<unsigned>(size), "xagg job ",
                options.aggregators.front().job, " has ", client_->workers(),
                " workers; the process group has ", size);
    completer_ = std::thread([this] { complete_in_order(); });
}

ProcessGroupXagg::~ProcessGroupXagg()
{
    {
        std::lock_guard g(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (completer_.joinable())
        completer_.join();
    // Closing the client fails what is still pending: nothing here waits for it any more.
    client_.reset();
    if (settings_.owned_job) {
        const Aggregator &a = *settings_.owned_job;
        try {
            delete_job(a);
        } catch (const std::exception &e) {
            std::fprintf(stderr, "xagg: could not delete job %u this run created: %s\n", a.job,
                         e.what());
        }
    }
}

std::optional<std::string> ProcessGroupXagg::why_not(const std::vector<at::Tensor> &tensors,
                                                     const c10d::AllreduceOptions &opts)
{
    if (tensors.size() != 1)
        return "all_reduce of " + std::to_string(tensors.size()) + " tensors in one call";
    const at::Tensor &t = tensors.front();
    const auto op = opts.reduceOp.op_;
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG)
        return std::string("all_reduce with an op other than SUM and AVG");
    if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kInt)
        return std::string("all_reduce of dtype ") + c10::toString(t.scalar_type());
    if (op == c10d::ReduceOp::AVG && t.scalar_type() != at::kFloat)
        return std::string("all_reduce AVG of int32");
    if (!t.is_contiguous())
        return std::string("all_reduce of a non-contiguous tensor");
    if (t.is_sparse())
        return std::string("all_reduce of a sparse tensor");
    return std::nullopt;
}

void ProcessGroupXagg::count_delegated(const std::string &kind)
{
    std::lock_guard g(mutex_);
    if (delegated_[kind]++ == 0)
        std::fprintf(stderr,
                     "xagg: %s goes to the gloo process group, not xagg (logged once; counted in "
                     "ProcessGroupXagg.delegated())\n",
                     kind.c_str());
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::allreduce(std::vector<at::Tensor> &tensors,
                                                           const c10d::AllreduceOptions &opts)
{
    if (auto reason = why_not(tensors, opts)) {
        count_delegated(*reason);
        return delegate_->allreduce(tensors, opts);
    }
    auto p = std::make_unique<Pending>();
    p->tensor = tensors.front();
    p->average = opts.reduceOp.op_ == c10d::ReduceOp::AVG;
    p->future = tensor_list_future();
    auto work = future_work(p->future);
    at::Tensor summed = p->tensor;
    if (!p->tensor.device().is_cpu()) {
        // Staged through pinned host memory: copied out on the tensor's current stream (a
        // blocking copy waits for the kernels that produced it), copied back on that stream
        // when summed.
        const c10::Device device = p->tensor.device();
        p->stream = c10::impl::getDeviceGuardImpl(device.type())->getStream(device);
        p->host =
            at::empty(p->tensor.sizes(), p->tensor.options().device(at::kCPU).pinned_memory(true));
        p->host.copy_(p->tensor);
        summed = p->host;
    }
    const size_t n = static_cast<size_t>(summed.numel());
    try {
        if (n == 0) {
            p->future->markCompleted(c10::IValue(std::vector<at::Tensor>{p->tensor}));
            return work;
        }
        p->op = summed.scalar_type() == at::kFloat
                    ? client_->allreduce_async(std::span<float>(summed.data_ptr<float>(), n))
                    : client_->allreduce_async(std::span<int32_t>(summed.data_ptr<int32_t>(), n));
    } catch (const ClientError &) {
        return failed_work(std::current_exception());
    }
    {
        std::lock_guard g(mutex_);
        xagg_allreduces_++;
        pending_.push_back(std::move(p));
    }
    wake_.notify_one();
    return work;
}

// Results are handed back in the order the calls were made. Every worker makes them in the same
// order (the collective rule), so a later call finishing first waits at most for the ones
// before it, which the caller waits for too.
void ProcessGroupXagg::complete_in_order()
{
    for (;;) {
        std::unique_ptr<Pending> p;
        {
            std::unique_lock g(mutex_);
            wake_.wait(g, [this] { return stopping_ || !pending_.empty(); });
            if (pending_.empty())
                return;
            p = std::move(pending_.front());
            pending_.pop_front();
        }
        try {
            const AllReduceReport report = p->op.wait();
            at::Tensor &summed = p->host.defined() ? p->host : p->tensor;
            if (p->average)
                summed.div_(static_cast<double>(report.contributors ? report.contributors
                                                                    : client_->workers()));
            if (p->host.defined()) {
                c10::StreamGuard on_its_stream(*p->stream);
                p->tensor.copy_(p->host);
            }
            p->future->markCompleted(c10::IValue(std::vector<at::Tensor>{p->tensor}));
        } catch (...) {
            p->future->setError(std::current_exception());
        }
    }
}

uint64_t ProcessGroupXagg::xagg_allreduces() const
{
    std::lock_guard g(mutex_);
    return xagg_allreduces_;
}

std::map<std::string, uint64_t> ProcessGroupXagg::delegated() const
{
    std::lock_guard g(mutex_);
    return delegated_;
}

// --- Delegated collectives -------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::broadcast(std::vector<at::Tensor> &tensors,
                                                           const c10d::BroadcastOptions &opts)
{
    count_delegated("broadcast");
    return delegate_->broadcast(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::allreduce_coalesced(
    std::vector<at::Tensor> &tensors, const c10d::AllreduceCoalescedOptions &opts)
{
    count_delegated("allreduce_coalesced");
    return delegate_->allreduce_coalesced(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::reduce(std::vector<at::Tensor> &tensors,
                                                        const c10d::ReduceOptions &opts)
{
    count_delegated("reduce");
    return delegate_->reduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::allgather(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &opts)
{
    count_delegated("allgather");
    return delegate_->allgather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::_allgather_base(at::Tensor &output,
                                                                 at::Tensor &input,
                                                                 const c10d::AllgatherOptions &opts)
{
    count_delegated("_allgather_base");
    return delegate_->_allgather_base(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::allgather_coalesced(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::AllgatherOptions &opts)
{
    count_delegated("allgather_coalesced");
    return delegate_->allgather_coalesced(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::gather(
    std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
    const c10d::GatherOptions &opts)
{
    count_delegated("gather");
    return delegate_->gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::scatter(
    std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ScatterOptions &opts)
{
    count_delegated("scatter");
    return delegate_->scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::reduce_scatter(
    std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
    const c10d::ReduceScatterOptions &opts)
{
    count_delegated("reduce_scatter");
    return delegate_->reduce_scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::_reduce_scatter_base(
    at::Tensor &output, at::Tensor &input, const c10d::ReduceScatterOptions &opts)
{
    count_delegated("_reduce_scatter_base");
    return delegate_->_reduce_scatter_base(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::alltoall_base(
    at::Tensor &output, at::Tensor &input, std::vector<int64_t> &output_split_sizes,
    std::vector<int64_t> &input_split_sizes, const c10d::AllToAllOptions &opts)
{
    count_delegated("alltoall_base");
    return delegate_->alltoall_base(output, input, output_split_sizes, input_split_sizes, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::alltoall(std::vector<at::Tensor> &outputs,
                                                          std::vector<at::Tensor> &inputs,
                                                          const c10d::AllToAllOptions &opts)
{
    count_delegated("alltoall");
    return delegate_->alltoall(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::send(std::vector<at::Tensor> &tensors,
                                                      int dst_rank, int tag)
{
    count_delegated("send");
    return delegate_->send(tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::recv(std::vector<at::Tensor> &tensors,
                                                      int src_rank, int tag)
{
    count_delegated("recv");
    return delegate_->recv(tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::recvAnysource(std::vector<at::Tensor> &tensors,
                                                               int tag)
{
    count_delegated("recv");
    return delegate_->recvAnysource(tensors, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXagg::barrier(const c10d::BarrierOptions &opts)
{
    count_delegated("barrier");
    return delegate_->barrier(opts);
}

}  // namespace xagg::torch_backend
