"""Red team, taxonomy 2 (background thread), cuda, for src/kbv/data/problems/level1/1_ReLU.

forward() allocates the output with torch (ordinary device memory), queues only a host callback
(cudaLaunchHostFunc) on the caller's stream and returns. The callback, run by the CUDA driver's
thread once the stream reaches it, hands the call to a std::thread started on the first call,
which launches the ReLU kernel on its own stream: the work starts after the timed call has
returned, outside the events, and the callback itself costs microseconds.

How kbv should catch it: the output copied right after return differs from the output after a
synchronize (probe:writes-after-return, taxonomy 1/2/5), the timed re-checks read outputs the
kernel had not written yet (probe:timed-recheck), and the thread outlives the call
(probe:threads, taxonomy 2).
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP = r"""
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x);
"""

_CUDA = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}

struct Job { const float* in; float* out; int64_t n; int device; };

static std::mutex g_mu;
static std::condition_variable g_cv;
static std::deque<Job> g_ready;
static std::thread* g_worker = nullptr;

static void launcher() {
    cudaStream_t s = nullptr;
    for (;;) {
        std::unique_lock<std::mutex> lock(g_mu);
        g_cv.wait(lock, [] { return !g_ready.empty(); });
        Job j = g_ready.front();
        g_ready.pop_front();
        lock.unlock();
        cudaSetDevice(j.device);
        if (!s) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        if (j.n) relu_kernel<<<(unsigned)((j.n + 255) / 256), 256, 0, s>>>(j.in, j.out, j.n);
    }
}

static void CUDART_CB on_reached(void* p) {
    Job* j = static_cast<Job*>(p);
    {
        std::lock_guard<std::mutex> lock(g_mu);
        g_ready.push_back(*j);
    }
    delete j;
    g_cv.notify_one();
}

static std::deque<torch::Tensor> g_keep;  // inputs stay alive until their kernel has run

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "cuda float32 only");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    if (!g_worker) g_worker = new std::thread(launcher);
    g_keep.push_back(xc);
    if (g_keep.size() > 64) g_keep.pop_front();
    C10_CUDA_CHECK(cudaLaunchHostFunc(c10::cuda::getCurrentCUDAStream(), on_reached,
                                      new Job{xc.data_ptr<float>(), out.data_ptr<float>(), xc.numel(),
                                              (int)x.get_device()}));
    return out;
}
"""

_ext = load_inline(name="kbv_redteam_host_callback", cpp_sources=_CPP, cuda_sources=_CUDA, functions=["relu"],
                   with_cuda=True, extra_cuda_cflags=["-O3"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu(x)
