// The hierarchical RNN's per-coordinate GRU cell (BiasGRUCell.call_feature_major)
// as one XLA CPU custom call: for 8 coordinates at a time, the gate sums stay
// in registers, so the [30, N] product, the reset-gated state and the
// candidate's product are never written to memory (XLA writes each out,
// because it does not fuse a dot with the code around it).
//
// Forward only (the Keras optimizer and the compiled meta-test loop; meta-
// training differentiates through the TensorFlow ops). Needs AVX2 and FMA;
// optimizer/fused_cell.py builds it and checks the CPU.
//
// Operands: rows [IN, N] (the cell's inputs, then its state, one column per
// coordinate), weights [IN, 3H] (columns: reset, update, candidate input
// part), bias [3H, T] (per tensor), state_weights [H, H] (candidate, state
// part), ends int64 [T] (end offset of each tensor's columns), sizes int64
// [2] = (N, T). Result: the new state [H, N].
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "xla/service/custom_call_status.h"
#include "xla/service/custom_call_target_registry.h"

namespace {

constexpr int kUnits = 10;
constexpr int kIn = 22;  // 12 features and the 10 units of state.
constexpr int kGates = 3 * kUnits;

// Eigen's rational tanh (the one TensorFlow's CPU kernels use).
inline __m256 Tanh8(__m256 x) {
  const __m256 c = _mm256_set1_ps(7.90531110763549805f);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), c)), c);
  const __m256 x2 = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-2.76076847742355e-16f);
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(2.00018790482477e-13f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(-8.60467152213735e-11f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(5.12229709037114e-08f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(1.48572235717979e-05f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(6.37261928875436e-04f));
  p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(4.89352455891786e-03f));
  p = _mm256_mul_ps(p, x);
  __m256 q = _mm256_set1_ps(1.19825839466702e-06f);
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(1.18534705686654e-04f));
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(2.26843463243900e-03f));
  q = _mm256_fmadd_ps(q, x2, _mm256_set1_ps(4.89352518554385e-03f));
  return _mm256_div_ps(p, q);
}

// The cell's sigmoid: 0.5 * tanh(0.5 x) + 0.5.
inline __m256 Sigmoid8(__m256 x) {
  const __m256 half = _mm256_set1_ps(0.5f);
  return _mm256_fmadd_ps(half, Tanh8(_mm256_mul_ps(half, x)), half);
}

// 8 coordinates: operand rows at xs + k * stride, new state rows at
// hs + j * stride; bias[j] holds gate j's bias for each of the 8.
inline void Cell8(const float* xs, int64_t stride, const float* w,
                  const __m256* bias, const float* sw, float* hs) {
  __m256 x[kIn];
  for (int k = 0; k < kIn; ++k) x[k] = _mm256_loadu_ps(xs + k * stride);
  const __m256* state = x + (kIn - kUnits);
  __m256 acc[kUnits], gated[kUnits], cand[kUnits];
  // Reset gate, then the reset-gated state.
  for (int j = 0; j < kUnits; ++j) acc[j] = bias[j];
  for (int k = 0; k < kIn; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(w + k * kGates + j), x[k],
                               acc[j]);
  for (int j = 0; j < kUnits; ++j)
    gated[j] = _mm256_mul_ps(Sigmoid8(acc[j]), state[j]);
  // Candidate: input part (the features only: the state rows of its
  // weights are zero) plus bias, then the gated state's product.
  for (int j = 0; j < kUnits; ++j) acc[j] = _mm256_setzero_ps();
  for (int k = 0; k < kIn - kUnits; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = _mm256_fmadd_ps(
          _mm256_broadcast_ss(w + k * kGates + 2 * kUnits + j), x[k], acc[j]);
  for (int j = 0; j < kUnits; ++j) acc[j] = _mm256_add_ps(acc[j], bias[2 * kUnits + j]);
  __m256 product[kUnits];
  for (int j = 0; j < kUnits; ++j) product[j] = _mm256_setzero_ps();
  for (int i = 0; i < kUnits; ++i)
    for (int j = 0; j < kUnits; ++j)
      product[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(sw + i * kUnits + j),
                                   gated[i], product[j]);
  for (int j = 0; j < kUnits; ++j) cand[j] = Tanh8(_mm256_add_ps(acc[j], product[j]));
  // Update gate; new state c + u * (state - c).
  for (int j = 0; j < kUnits; ++j) acc[j] = bias[kUnits + j];
  for (int k = 0; k < kIn; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = _mm256_fmadd_ps(
          _mm256_broadcast_ss(w + k * kGates + kUnits + j), x[k], acc[j]);
  for (int j = 0; j < kUnits; ++j) {
    const __m256 u = Sigmoid8(acc[j]);
    _mm256_storeu_ps(hs + j * stride,
                     _mm256_fmadd_ps(u, _mm256_sub_ps(state[j], cand[j]), cand[j]));
  }
}

struct Args {
  const float* rows;
  const float* w;
  const float* bias;  // [3H, T]
  const float* sw;
  const int64_t* ends;
  int64_t n, tensors;
  float* out;
};

// The bias of the 8 coordinates starting at `first`, tensor `t` the one
// holding coordinate `first`.
inline void Biases(const Args& a, int64_t first, int64_t t, __m256* bias) {
  if (a.ends[t] >= first + 8 || t == a.tensors - 1) {
    for (int j = 0; j < kGates; ++j)
      bias[j] = _mm256_set1_ps(a.bias[j * a.tensors + t]);
    return;
  }
  alignas(32) float lanes[kGates][8];
  int64_t s = t;
  for (int l = 0; l < 8; ++l) {
    while (s < a.tensors - 1 && first + l >= a.ends[s]) ++s;
    for (int j = 0; j < kGates; ++j) lanes[j][l] = a.bias[j * a.tensors + s];
  }
  for (int j = 0; j < kGates; ++j) bias[j] = _mm256_load_ps(lanes[j]);
}

void Range(const Args& a, int64_t lo, int64_t hi) {  // vectors [lo, hi)
  int64_t t = 0;
  __m256 bias[kGates];
  int64_t bias_for = -1;
  for (int64_t v = lo; v < hi; ++v) {
    const int64_t first = v * 8;
    while (t < a.tensors - 1 && first >= a.ends[t]) ++t;
    if (bias_for != t || a.ends[t] < first + 8) {
      Biases(a, first, t, bias);
      bias_for = a.ends[t] < first + 8 ? -1 : t;
    }
    Cell8(a.rows + first, a.n, a.w, bias, a.sw, a.out + first);
  }
}

void FusedGruCell(void* out, const void** in, XlaCustomCallStatus*) {
  const int64_t* sizes = static_cast<const int64_t*>(in[5]);
  Args a{static_cast<const float*>(in[0]), static_cast<const float*>(in[1]),
         static_cast<const float*>(in[2]), static_cast<const float*>(in[3]),
         static_cast<const int64_t*>(in[4]), sizes[0], sizes[1],
         static_cast<float*>(out)};
  const int64_t vectors = a.n / 8;
  // One thread per core the machine has (at most 8: the cell is bound by
  // memory traffic beyond a few cores), each on a contiguous share.
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  threads = threads < 1 ? 1 : (threads > 8 ? 8 : threads);
  if (vectors < 4096) threads = 1;
  std::vector<std::thread> pool;
  for (int p = 1; p < threads; ++p)
    pool.emplace_back(Range, std::cref(a), vectors * p / threads,
                      vectors * (p + 1) / threads);
  Range(a, 0, vectors / threads);
  for (auto& th : pool) th.join();
  const int64_t done = vectors * 8;
  if (done < a.n) {  // The last coordinates through a zero-padded vector.
    const int m = static_cast<int>(a.n - done);
    alignas(32) float rows[kIn * 8] = {0};
    alignas(32) float state[kUnits * 8];
    for (int k = 0; k < kIn; ++k)
      std::memcpy(rows + k * 8, a.rows + k * a.n + done, m * sizeof(float));
    int64_t t = 0;
    while (t < a.tensors - 1 && done >= a.ends[t]) ++t;
    __m256 bias[kGates];
    Biases(a, done, t, bias);
    Cell8(rows, 8, a.w, bias, a.sw, state);
    for (int j = 0; j < kUnits; ++j)
      std::memcpy(a.out + j * a.n + done, state + j * 8, m * sizeof(float));
  }
}

}  // namespace

XLA_CPU_REGISTER_CUSTOM_CALL_TARGET_WITH_SYM("l2o_scale_fused_gru_cell",
                                             FusedGruCell);
