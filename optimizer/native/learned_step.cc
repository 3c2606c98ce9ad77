// The per-coordinate part of the hierarchical RNN's step
// (HierarchicalRNN._packed_core in optimizer/hierarchical_rnn.py) as one XLA
// CPU custom call, for the configuration of every shipped optimizer: 4
// gradient scales with their products, log mean squares and the relative
// learning rate as the 12 inputs of a 10-unit per-parameter GRU, a dynamic
// output scale and the gradient shortcut, no attention.
//
// Why: XLA writes each of that step's ~20 intermediate [k, N] arrays to
// memory and reads it back (it fuses no matrix product with the code around
// it), about 1 KB of traffic per parameter. Here 8 coordinates at a time go
// from their state to their new state in registers: the state is read and
// written once (about 45 floats per parameter). What remains is its
// arithmetic, about 370 instructions per coordinate (docs/performance.md,
// "The native step").
//
// Forward only: the Keras optimizer and the compiled meta-test loop use it,
// meta-training differentiates the TensorFlow ops. Needs AVX2 and FMA;
// optimizer/native_step.py builds it, checks the CPU and the configuration.
//
// Operands: 0 accum [4, N], 1 ms [4, N], 2 decays [2, N] (scale, input),
// 3 log_lr [1, N], 4 state [10, N], 5 weights [22, 30] (gates: reset,
// update; then the candidate's input part, its state rows zero), 6
// state_weights [10, 10] (candidate, state part), 7 bias [30, T] (cell bias
// plus each tensor's injected bias), 8 readout [10, 4] (update, scale decay,
// input decay, learning rate), 9 readout_bias [4], 10 shortcut [4],
// 11 scalars [4] (problem mean log lr, lr momentum, max log lr, step size
// offset), 12 shape int64 [2] (N, T), 13 ends int64 [T] (each tensor's end
// offset), then the T gradients, flat.
// Results (a tuple): accum, ms, decays, log_lr, state as the operands, the
// update direction [1, N], the step's learning rate [1, N] and per-tensor
// sums [23, T]: of the 10 new state rows, of the 12 inputs, of the squared
// update direction.
#include <immintrin.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include <string>

// The two functions of XLA's registry of CPU custom-call targets it needs
// (xla/service/custom_call_target_registry.h, exported by
// libtensorflow_cc): declared here rather than included, which keeps the
// build to a few seconds (the header brings ~100,000 lines of Abseil).
namespace xla {
class CustomCallTargetRegistry {
 public:
  static CustomCallTargetRegistry* Global();
  void Register(const std::string& symbol, void* address,
                const std::string& platform);
};
}  // namespace xla

namespace {

constexpr int kScales = 4;
constexpr int kInputs = 12;  // 4 scaled gradients, 3 products, 4 log ms, lr.
constexpr int kUnits = 10;
constexpr int kRows = kInputs + kUnits;
constexpr int kGates = 3 * kUnits;
constexpr int kReadouts = 4;
constexpr int kSums = kUnits + kInputs + 1;
// Coordinates per work item: items, not threads, fix the order of every
// sum, so the results do not depend on the number of cores.
constexpr int64_t kItem = 16384;

using V = __m256;

inline V Set(float x) { return _mm256_set1_ps(x); }
inline V Add(V a, V b) { return _mm256_add_ps(a, b); }
inline V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
// max(lo, x) and min(hi, x) keep a NaN x (the second operand is returned
// when either is NaN), so a diverging step stays visible.
inline V Clamp(V x, float lo, float hi) {
  return _mm256_min_ps(Set(hi), _mm256_max_ps(Set(lo), x));
}

// 1 / x to about 2 ulp: the reciprocal estimate and one Newton step, a
// fraction of a division's cost (the step has ~40 divisions per coordinate).
inline V Recip(V x) {
  const V r = _mm256_rcp_ps(x);
  return Fma(r, _mm256_fnmadd_ps(x, r, Set(1.f)), r);
}

// 1 / sqrt(x) to about 2 ulp, likewise (an estimate and one Newton step).
inline V Rsqrt(V x) {
  const V r = _mm256_rsqrt_ps(x);
  return Mul(r, _mm256_fnmadd_ps(Mul(Set(0.5f), x), Mul(r, r), Set(1.5f)));
}

// sqrt(x) for x >= 0 as x / sqrt(x), 0 at 0.
inline V Sqrt(V x) {
  return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ),
                          Mul(x, Rsqrt(x)));
}

// Eigen's rational tanh (TensorFlow's and XLA's CPU code use the same).
inline V Tanh(V x) {
  const float c = 7.90531110763549805f;
  x = Clamp(x, -c, c);
  const V x2 = Mul(x, x);
  V p = Set(-2.76076847742355e-16f);
  p = Fma(p, x2, Set(2.00018790482477e-13f));
  p = Fma(p, x2, Set(-8.60467152213735e-11f));
  p = Fma(p, x2, Set(5.12229709037114e-08f));
  p = Fma(p, x2, Set(1.48572235717979e-05f));
  p = Fma(p, x2, Set(6.37261928875436e-04f));
  p = Fma(p, x2, Set(4.89352455891786e-03f));
  p = Mul(p, x);
  V q = Set(1.19825839466702e-06f);
  q = Fma(q, x2, Set(1.18534705686654e-04f));
  q = Fma(q, x2, Set(2.26843463243900e-03f));
  q = Fma(q, x2, Set(4.89352518554385e-03f));
  return Mul(p, Recip(q));
}

// 0.5 tanh(0.5 x) + 0.5, the form the TensorFlow cell computes.
inline V Sigmoid(V x) {
  const V half = Set(0.5f);
  return Fma(half, Tanh(Mul(half, x)), half);
}

// Cephes' logf (Eigen's plog): log(0) = -inf, log(x < 0) = NaN, log(inf) =
// inf, NaN stays NaN.
inline V Log(V x0) {
  const V one = Set(1.f);
  V x = _mm256_max_ps(x0, Set(std::numeric_limits<float>::min()));
  __m256i bits = _mm256_castps_si256(x);
  V e = _mm256_cvtepi32_ps(
      _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  x = _mm256_or_ps(
      _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x807fffff))),
      Set(0.5f));
  const V small = _mm256_cmp_ps(x, Set(0.707106781186547524f), _CMP_LT_OQ);
  const V tmp = _mm256_and_ps(x, small);
  x = Sub(x, one);
  e = Sub(e, _mm256_and_ps(one, small));
  x = Add(x, tmp);
  const V z = Mul(x, x);
  V y = Set(7.0376836292e-2f);
  y = Fma(y, x, Set(-1.1514610310e-1f));
  y = Fma(y, x, Set(1.1676998740e-1f));
  y = Fma(y, x, Set(-1.2420140846e-1f));
  y = Fma(y, x, Set(1.4249322787e-1f));
  y = Fma(y, x, Set(-1.6668057665e-1f));
  y = Fma(y, x, Set(2.0000714765e-1f));
  y = Fma(y, x, Set(-2.4999993993e-1f));
  y = Fma(y, x, Set(3.3333331174e-1f));
  y = Mul(Mul(y, x), z);
  y = Fma(e, Set(-2.12194440e-4f), y);
  y = Fma(z, Set(-0.5f), y);
  x = Add(x, y);
  x = Fma(e, Set(0.693359375f), x);
  const V inf = Set(std::numeric_limits<float>::infinity());
  x = _mm256_blendv_ps(x, inf, _mm256_cmp_ps(x0, inf, _CMP_EQ_OQ));
  x = _mm256_blendv_ps(x, Set(-std::numeric_limits<float>::infinity()),
                       _mm256_cmp_ps(x0, _mm256_setzero_ps(), _CMP_EQ_OQ));
  // Negative or NaN: NaN.
  return _mm256_blendv_ps(
      x, Set(std::numeric_limits<float>::quiet_NaN()),
      _mm256_cmp_ps(x0, _mm256_setzero_ps(), _CMP_NGE_UQ));
}

// Cephes' expf (Eigen's pexp); NaN stays NaN.
inline V Exp(V x0) {
  V x = Clamp(x0, -88.3762626647949f, 88.3762626647950f);
  V fx = _mm256_floor_ps(Fma(x, Set(1.44269504088896341f), Set(0.5f)));
  x = Fma(fx, Set(-0.693359375f), x);
  x = Fma(fx, Set(2.12194440e-4f), x);
  const V z = Mul(x, x);
  V y = Set(1.9875691500e-4f);
  y = Fma(y, x, Set(1.3981999507e-3f));
  y = Fma(y, x, Set(8.3334519073e-3f));
  y = Fma(y, x, Set(4.1665795894e-2f));
  y = Fma(y, x, Set(1.6666665459e-1f));
  y = Fma(y, x, Set(5.0000001201e-1f));
  y = Add(Fma(y, z, x), Set(1.f));
  const __m256i pow2 = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return Mul(y, _mm256_castsi256_ps(pow2));
}

// 1 / (1 + exp(-x)), tf.nn.sigmoid.
inline V Logistic(V x) {
  return Recip(Add(Set(1.f), Exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

inline V Zero() { return _mm256_setzero_ps(); }
inline V Load(const float* q) { return _mm256_loadu_ps(q); }
inline void Store(float* q, V v) { _mm256_storeu_ps(q, v); }
// x where `test` is not zero, else 0.
inline V ZeroWhereZero(V test, V x) {
  return _mm256_andnot_ps(_mm256_cmp_ps(test, Zero(), _CMP_EQ_OQ), x);
}
// x clipped to [lo, hi], NaN kept (see Clamp).
inline V Clip(V x, float lo, V hi) {
  return _mm256_min_ps(hi, _mm256_max_ps(Set(lo), x));
}

// What every coordinate of one tensor shares.
struct Shared {
  // The weights, each broadcast to a vector once per call, so that every
  // product is one multiply-add with a memory operand.
  const __m256* w;        // [22, 30]
  const __m256* sw;       // [10, 10]
  const __m256* readout;  // [10, 4]
  V bias[kGates];        // this tensor's
  V readout_bias[kReadouts];
  V shortcut[kScales];
  V lr_mean, momentum, max_log_lr, offset;
};

// Rows of one block of coordinates: row r of an array at p + r * stride.
struct Block {
  const float* grad;
  const float *accum, *ms, *decays, *log_lr, *state;
  float *accum_o, *ms_o, *decays_o, *log_lr_o, *state_o, *delta_o, *lr_o;
  int64_t stride;
};

// 8 coordinates, one register each row; adds their contributions, times `lanes` (1 or 0 per
// coordinate), to the per-tensor sums.
inline void Step(const Block& b, const Shared& s, V lanes, V* sums) {
  const int64_t st = b.stride;
  const V one = Set(1.f);
  const V grad = Load(b.grad);
  // Gradient accumulators on four timescales (the input decay and its
  // square roots), and their running mean squares, the scale decay ignored
  // where a mean square is still zero (the original's first step).
  const V scale_decay = Load(b.decays);
  V decay = Load(b.decays + st);
  V x[kRows];
  V log_ms[kScales];
  V log_ms_mean = Zero();
  for (int i = 0; i < kScales; ++i) {
    if (i) decay = Sqrt(decay);
    const V accum = Fma(grad, Sub(one, decay), Mul(Load(b.accum + i * st), decay));
    const V old_ms = Load(b.ms + i * st);
    const V sd = ZeroWhereZero(old_ms, scale_decay);
    const V ms = Add(Mul(Sub(one, sd), Fma(accum, accum, Set(1e-12f))),
                     Mul(sd, old_ms));
    Store(b.accum_o + i * st, accum);
    Store(b.ms_o + i * st, ms);
    // asinh by the original's formula, log(y + sqrt(1 + y^2)).
    const V y = Mul(accum, Rsqrt(Add(ms, Set(1e-16f))));
    const V t = Fma(y, y, one);  // >= 1
    x[i] = Log(Fma(t, Rsqrt(t), y));
    log_ms[i] = Log(Add(ms, Set(1e-16f)));
    log_ms_mean = Add(log_ms_mean, log_ms[i]);
  }
  for (int i = 0; i + 1 < kScales; ++i) x[kScales + i] = Mul(x[i], x[i + 1]);
  log_ms_mean = Mul(log_ms_mean, Set(1.f / kScales));
  for (int i = 0; i < kScales; ++i)
    x[2 * kScales - 1 + i] = Sub(log_ms[i], log_ms_mean);
  const V log_lr = Load(b.log_lr);
  x[kInputs - 1] = Sub(log_lr, s.lr_mean);
  for (int k = 0; k < kUnits; ++k) x[kInputs + k] = Load(b.state + k * st);
  for (int k = 0; k < kInputs; ++k) sums[kUnits + k] = Fma(lanes, x[k], sums[kUnits + k]);
  const V* state = x + kInputs;

  // The GRU: reset gate, the reset-gated state, the candidate, the update
  // gate, the new state c + u (state - c).
  V acc[kUnits], gated[kUnits];
  for (int j = 0; j < kUnits; ++j) acc[j] = s.bias[j];
  for (int k = 0; k < kRows; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = Fma(s.w[k * kGates + j], x[k], acc[j]);
  for (int j = 0; j < kUnits; ++j) gated[j] = Mul(Sigmoid(acc[j]), state[j]);
  for (int j = 0; j < kUnits; ++j) acc[j] = s.bias[2 * kUnits + j];
  for (int k = 0; k < kInputs; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = Fma(s.w[k * kGates + 2 * kUnits + j], x[k], acc[j]);
  V cand[kUnits];
  for (int j = 0; j < kUnits; ++j) cand[j] = Zero();
  for (int i = 0; i < kUnits; ++i)
    for (int j = 0; j < kUnits; ++j)
      cand[j] = Fma(s.sw[i * kUnits + j], gated[i], cand[j]);
  for (int j = 0; j < kUnits; ++j) cand[j] = Tanh(Add(acc[j], cand[j]));
  for (int j = 0; j < kUnits; ++j) acc[j] = s.bias[kUnits + j];
  for (int k = 0; k < kRows; ++k)
    for (int j = 0; j < kUnits; ++j)
      acc[j] = Fma(s.w[k * kGates + kUnits + j], x[k], acc[j]);
  V h[kUnits];
  for (int j = 0; j < kUnits; ++j) {
    h[j] = Fma(Sigmoid(acc[j]), Sub(state[j], cand[j]), cand[j]);
    Store(b.state_o + j * st, h[j]);
    sums[j] = Fma(lanes, h[j], sums[j]);
  }

  // Readouts: update direction (plus the gradient shortcut), the two
  // decays, the learning rate.
  V out[kReadouts];
  for (int r = 0; r < kReadouts; ++r) out[r] = s.readout_bias[r];
  for (int j = 0; j < kUnits; ++j)
    for (int r = 0; r < kReadouts; ++r)
      out[r] = Fma(s.readout[j * kReadouts + r], h[j], out[r]);
  V delta = out[0];
  for (int i = 0; i < kScales; ++i) delta = Fma(s.shortcut[i], x[i], delta);
  Store(b.delta_o, delta);
  sums[kSums - 1] = Fma(lanes, Mul(delta, delta), sums[kSums - 1]);
  Store(b.decays_o, Logistic(out[1]));
  Store(b.decays_o + st, Logistic(out[2]));
  // The step's log learning rate, clipped in the value only (x + (clip(x)
  // - x), as the TensorFlow step computes it), its momentum average, and
  // the parameter's learning rate.
  const V raw = Add(log_lr, out[3]);
  const V step_log_lr = Add(raw, Sub(Clip(raw, -33.f, s.max_log_lr), raw));
  Store(b.log_lr_o, Fma(s.momentum, log_lr, Mul(Sub(one, s.momentum), step_log_lr)));
  Store(b.lr_o, Exp(Add(step_log_lr, s.offset)));
}

struct Call {
  const float *accum, *ms, *decays, *log_lr, *state;
  const float *w, *sw, *bias, *readout, *readout_bias, *shortcut, *scalars;
  const int64_t* ends;
  const float* const* grads;
  float *accum_o, *ms_o, *decays_o, *log_lr_o, *state_o, *delta_o, *lr_o;
  int64_t n, tensors;
};

struct Item {
  int64_t tensor, lo, hi;
};

// Rows of one tile, contiguous: the step reads and writes whole tiles, so
// memory sees runs of 4 KB of each row instead of ~45 interleaved streams
// (whose addresses, N floats apart, often fall in the same cache sets).
// A tile's rows (180 KB) stay in the core's L2 cache.
constexpr int kTile = 1024;
constexpr int kInRows = 1 + 2 * kScales + 2 + 1 + kUnits;       // 22
constexpr int kOutRows = 2 * kScales + 2 + 1 + kUnits + 2;      // 23
constexpr int kWidth = 8;  // coordinates per register
constexpr int kLines = kTile / 16;  // cache lines per tile row
constexpr int kPrefetch = (kInRows * kLines + kTile / kWidth - 1) / (kTile / kWidth);

// Writes m floats to `to` past the caches (they are read only after the
// whole call, from memory anyway; a cached write would first read each
// line), by aligned streaming stores between plain stores of the ends.
inline void StreamOut(float* to, const float* from, int m) {
  int i = 0;
  for (; i < m && (reinterpret_cast<uintptr_t>(to + i) & 31); ++i) to[i] = from[i];
  for (; i + 8 <= m; i += 8) _mm256_stream_ps(to + i, _mm256_loadu_ps(from + i));
  for (; i < m; ++i) to[i] = from[i];
}

// Coordinates [lo, hi) of one tensor; writes their sums to `out` [23].
void RunItem(const Call& c, const Shared& s, const Item& item, float* out) {
  V sums[kSums];
  for (int k = 0; k < kSums; ++k) sums[k] = Zero();
  const float* grad = c.grads[item.tensor] - (item.tensor ? c.ends[item.tensor - 1] : 0);
  static thread_local float in[kInRows][kTile] __attribute__((aligned(32)));
  static thread_local float res[kOutRows][kTile] __attribute__((aligned(32)));
  // Input and result rows: (array, row) in tile order.
  const float* src[kInRows];
  float* dst[kOutRows];
  src[0] = grad;
  for (int i = 0; i < kScales; ++i) {
    src[1 + i] = c.accum + i * c.n;
    src[1 + kScales + i] = c.ms + i * c.n;
    dst[i] = c.accum_o + i * c.n;
    dst[kScales + i] = c.ms_o + i * c.n;
  }
  for (int i = 0; i < 2; ++i) {
    src[1 + 2 * kScales + i] = c.decays + i * c.n;
    dst[2 * kScales + i] = c.decays_o + i * c.n;
  }
  src[3 + 2 * kScales] = c.log_lr;
  dst[2 + 2 * kScales] = c.log_lr_o;
  for (int k = 0; k < kUnits; ++k) {
    src[4 + 2 * kScales + k] = c.state + k * c.n;
    dst[3 + 2 * kScales + k] = c.state_o + k * c.n;
  }
  dst[kOutRows - 2] = c.delta_o;
  dst[kOutRows - 1] = c.lr_o;
  const Block b{in[0], in[1], in[1 + kScales], in[1 + 2 * kScales],
                in[3 + 2 * kScales], in[4 + 2 * kScales],
                res[0], res[kScales], res[2 * kScales], res[2 + 2 * kScales],
                res[3 + 2 * kScales], res[kOutRows - 2], res[kOutRows - 1],
                kTile};
  for (int64_t first = item.lo; first < item.hi; first += kTile) {
    const int m = static_cast<int>(std::min<int64_t>(kTile, item.hi - first));
    for (int r = 0; r < kInRows; ++r)
      std::memcpy(in[r], src[r] + first, m * sizeof(float));
    // The next tile's rows are fetched while this one is computed (a
    // whole tile only: kPrefetch lines per 8 coordinates).
    const bool fetch = first + 2 * kTile <= item.hi;
    const int64_t next = first + kTile;
    for (int v = 0; v < kTile; v += kWidth) {
      if (v >= m) break;
      if (fetch) {
        for (int q = 0; q < kPrefetch; ++q) {
          const int l = (v / kWidth) * kPrefetch + q;  // < kInRows * kLines
          _mm_prefetch(reinterpret_cast<const char*>(
                           src[l / kLines] + next + 16 * (l % kLines)),
                       _MM_HINT_T0);
        }
      }
      Block at = b;
      at.grad += v; at.accum += v; at.ms += v; at.decays += v;
      at.log_lr += v; at.state += v; at.accum_o += v; at.ms_o += v;
      at.decays_o += v; at.log_lr_o += v; at.state_o += v; at.delta_o += v;
      at.lr_o += v;
      V lanes = Set(1.f);
      if (v + kWidth > m) {  // The tensor's last coordinates: zero-padded.
        alignas(32) float mask[kWidth];
        for (int l = 0; l < kWidth; ++l) mask[l] = v + l < m ? 1.f : 0.f;
        lanes = Load(mask);
        for (int r = 0; r < kInRows; ++r)
          for (int l = m; l < v + kWidth; ++l) in[r][l] = 0.f;
      }
      Step(at, s, lanes, sums);
    }
    for (int r = 0; r < kOutRows; ++r) StreamOut(dst[r] + first, res[r], m);
  }
  for (int k = 0; k < kSums; ++k) {
    alignas(32) float lanes[kWidth];
    Store(lanes, sums[k]);
    float total = 0.f;
    for (int l = 0; l < kWidth; ++l) total += lanes[l];
    out[k] = total;
  }
}

struct Weights {
  __m256 w[kRows * kGates];
  __m256 sw[kUnits * kUnits];
  __m256 readout[kUnits * kReadouts];
};

Shared SharedFor(const Call& c, const Weights& weights, int64_t tensor) {
  Shared s;
  s.w = weights.w;
  s.sw = weights.sw;
  s.readout = weights.readout;
  for (int j = 0; j < kGates; ++j) s.bias[j] = Set(c.bias[j * c.tensors + tensor]);
  for (int r = 0; r < kReadouts; ++r) s.readout_bias[r] = Set(c.readout_bias[r]);
  for (int i = 0; i < kScales; ++i) s.shortcut[i] = Set(c.shortcut[i]);
  s.lr_mean = Set(c.scalars[0]);
  s.momentum = Set(c.scalars[1]);
  s.max_log_lr = Set(c.scalars[2]);
  s.offset = Set(c.scalars[3]);
  return s;
}

// XLA's CPU custom-call signature: results, operands, status (unused).
void LearnedStep(void* out, const void** in, void*) {
  void** results = static_cast<void**>(out);
  Call c;
  c.accum = static_cast<const float*>(in[0]);
  c.ms = static_cast<const float*>(in[1]);
  c.decays = static_cast<const float*>(in[2]);
  c.log_lr = static_cast<const float*>(in[3]);
  c.state = static_cast<const float*>(in[4]);
  c.w = static_cast<const float*>(in[5]);
  c.sw = static_cast<const float*>(in[6]);
  c.bias = static_cast<const float*>(in[7]);
  c.readout = static_cast<const float*>(in[8]);
  c.readout_bias = static_cast<const float*>(in[9]);
  c.shortcut = static_cast<const float*>(in[10]);
  c.scalars = static_cast<const float*>(in[11]);
  const int64_t* shape = static_cast<const int64_t*>(in[12]);
  c.n = shape[0];
  c.tensors = shape[1];
  c.ends = static_cast<const int64_t*>(in[13]);
  c.grads = reinterpret_cast<const float* const*>(in + 14);
  c.accum_o = static_cast<float*>(results[0]);
  c.ms_o = static_cast<float*>(results[1]);
  c.decays_o = static_cast<float*>(results[2]);
  c.log_lr_o = static_cast<float*>(results[3]);
  c.state_o = static_cast<float*>(results[4]);
  c.delta_o = static_cast<float*>(results[5]);
  c.lr_o = static_cast<float*>(results[6]);
  float* sums = static_cast<float*>(results[7]);  // [23, T]

  std::vector<Weights> table(1);  // 32-byte aligned (C++17).
  Weights& weights = table[0];
  for (int i = 0; i < kRows * kGates; ++i) weights.w[i] = _mm256_set1_ps(c.w[i]);
  for (int i = 0; i < kUnits * kUnits; ++i) weights.sw[i] = _mm256_set1_ps(c.sw[i]);
  for (int i = 0; i < kUnits * kReadouts; ++i)
    weights.readout[i] = _mm256_set1_ps(c.readout[i]);

  std::vector<Item> items;
  for (int64_t t = 0, start = 0; t < c.tensors; start = c.ends[t++])
    for (int64_t lo = start; lo < c.ends[t]; lo += kItem)
      items.push_back(Item{t, lo, std::min(c.ends[t], lo + kItem)});
  std::vector<float> item_sums(items.size() * kSums);
  std::atomic<size_t> next{0};
  // The caller's floating-point mode (TensorFlow flushes denormals to
  // zero) in every thread: new threads start with the default one.
  const unsigned int mode = _mm_getcsr();
  auto work = [&]() {
    _mm_setcsr(mode);
    for (size_t i; (i = next.fetch_add(1)) < items.size();) {
      const Shared s = SharedFor(c, weights, items[i].tensor);
      RunItem(c, s, items[i], item_sums.data() + i * kSums);
    }
    _mm_sfence();  // The streamed results are visible before the join.
  };
  // One thread per CPU this process may run on (at most 8: beyond, the
  // step is bound by memory traffic).
  cpu_set_t cpus;
  int threads = sched_getaffinity(0, sizeof(cpus), &cpus) == 0
                    ? CPU_COUNT(&cpus)
                    : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min({threads, 8, static_cast<int>(items.size())}));
  if (c.n < 4 * kItem) threads = 1;
  std::vector<std::thread> pool;
  for (int p = 1; p < threads; ++p) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  for (int64_t k = 0; k < kSums; ++k)
    for (int64_t t = 0; t < c.tensors; ++t) sums[k * c.tensors + t] = 0.f;
  for (size_t i = 0; i < items.size(); ++i)
    for (int k = 0; k < kSums; ++k)
      sums[k * c.tensors + items[i].tensor] += item_sums[i * kSums + k];
}

}  // namespace

// Registered when the library is loaded (optimizer/native_step.py).
const bool kRegistered = [] {
  xla::CustomCallTargetRegistry::Global()->Register(
      "l2o_scale_learned_step", reinterpret_cast<void*>(&LearnedStep),
      "Host");
  return true;
}();
