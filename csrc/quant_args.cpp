#include "quant_args.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace sgl_quant {

namespace detail {
void append(std::string& s, const torch::stable::Device& v) {
  s += v.is_cuda() ? "cuda" : v.is_cpu() ? "cpu" : "device";
  if (v.has_index()) s += ":" + std::to_string(v.index());
}
}  // namespace detail

namespace {

// Element by element: HeaderOnlyArrayRef's operator== is newer than torch 2.11's headers, and the source
// build must work against every torch the wheel supports (the device machine builds against 2.11).
bool same_sizes(const Tensor& t, const std::vector<int64_t>& shape) {
  const IntArrayRef sizes = t.sizes();
  return std::equal(sizes.begin(), sizes.end(), shape.begin(), shape.end());
}

void check_same_device(const char* op, const Tensor& input, const Tensor& t, const char* name) {
  SGLQ_CHECK(t.device() == input.device(), op, ": ", name, " must be on the same device as input (", input.device(),
             "), got ", t.device());
}

bool is_16bit_float(const Tensor& t) {
  return t.scalar_type() == ScalarType::BFloat16 || t.scalar_type() == ScalarType::Half;
}

// input: bf16/fp16, last dim contiguous, other strides non-negative, any (2-byte-aligned) address.
void check_input(const char* op, const Tensor& input) {
  SGLQ_CHECK(is_16bit_float(input), op, ": input must be bfloat16 or float16, got ", input.scalar_type());
  if (input.numel() == 0) return;  // nothing is read: strides do not matter
  SGLQ_CHECK(input.size(-1) <= 1 || input.stride(-1) == 1, op,
             ": input's last dimension must be contiguous (stride 1), got strides ", input.strides());
  for (int64_t d = 0; d + 1 < input.dim(); ++d) {
    SGLQ_CHECK(input.size(d) <= 1 || input.stride(d) >= 0, op, ": input's stride ", input.stride(d), " of dimension ",
               d, " must not be negative; got strides ", input.strides());
  }
}

// A tensor of the given shape on input's device and (when given) of the given dtype, at any address.
void check_shaped_tensor(const char* op, const Tensor& input, const Tensor& t, const char* name,
                         const std::vector<int64_t>& expected_shape, std::optional<ScalarType> dtype = std::nullopt) {
  SGLQ_CHECK(t.defined(), op, ": ", name, " is undefined");
  SGLQ_CHECK(!dtype || t.scalar_type() == *dtype, op, ": ", name, " must have input's dtype ", *dtype, ", got ",
             t.scalar_type());
  check_same_device(op, input, t, name);
  SGLQ_CHECK(same_sizes(t, expected_shape), op, ": ", name, " must have shape ", expected_shape, ", got ", t.sizes());
}

// check_shaped_tensor, and contiguous.
void check_dense_tensor(const char* op, const Tensor& input, const Tensor& t, const char* name,
                        const std::vector<int64_t>& expected_shape, std::optional<ScalarType> dtype = std::nullopt) {
  check_shaped_tensor(op, input, t, name, expected_shape, dtype);
  SGLQ_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous, got strides ", t.strides());
}

// output_q of the v2 and fused ops: the given shape [..., H] on input's device, at any address, its last
// dimension contiguous and its rows one stride apart (>= H, < 2^31: a padded row-major buffer's view).
// Returns that row stride.
int64_t check_codes_tensor(const char* op, const Tensor& input, const Tensor& output_q,
                           const std::vector<int64_t>& expected_shape) {
  check_shaped_tensor(op, input, output_q, "output_q", expected_shape);
  const int64_t hidden = expected_shape.back();
  int64_t row_stride = hidden, expected = -1;  // the rows' stride; the stride the next outer dimension must have
  if (output_q.numel() == 0) return row_stride;
  SGLQ_CHECK(hidden <= 1 || output_q.stride(-1) == 1, op,
             ": output_q's last dimension must be contiguous (stride 1), got strides ", output_q.strides());
  for (int64_t d = output_q.dim() - 2; d >= 0; --d) {
    if (output_q.size(d) == 1) continue;
    if (expected < 0) {
      row_stride = output_q.stride(d);
    } else {
      SGLQ_CHECK(output_q.stride(d) == expected, op, ": output_q's rows must be one stride apart (strides (M * S, S, 1)), ",
                 "got shape ", output_q.sizes(), " and strides ", output_q.strides());
    }
    expected = output_q.stride(d) * output_q.size(d);
  }
  SGLQ_CHECK(row_stride >= hidden && row_stride <= std::numeric_limits<int32_t>::max(), op,
             ": output_q's row stride must be at least H=", hidden, " and below 2^31, got strides ", output_q.strides());
  return row_stride;
}

void check_group_size(const char* op, int64_t group_size) {
  bool ok = false;
  for (int gs : kGroupSizes) ok |= (group_size == gs);
  SGLQ_CHECK(ok, op, ": group_size must be one of 16, 32, 64, 128, 256, got ", group_size);
}

// output_q's dtype: fp8 e4m3fn or int8 codes.
void check_code_dtype(const char* op, const Tensor& output_q) {
  SGLQ_CHECK(output_q.scalar_type() == ScalarType::Float8_e4m3fn || output_q.scalar_type() == ScalarType::Char, op,
             ": output_q must be float8_e4m3fn or int8, got ", output_q.scalar_type());
}

// output_q's dtype and the code range the caller passes for it.
void check_codes(const char* op, const Tensor& output_q, double min_8bit, double max_8bit) {
  check_code_dtype(op, output_q);
  const bool fp8 = output_q.scalar_type() == ScalarType::Float8_e4m3fn;
  const double lo = fp8 ? Fp8Range::kMin : Int8Range::kMin;
  const double hi = fp8 ? Fp8Range::kMax : Int8Range::kMax;
  SGLQ_CHECK(min_8bit == lo && max_8bit == hi, op, ": min_8bit/max_8bit must equal the range of output_q's dtype ",
             output_q.scalar_type(), " (", lo, ", ", hi, "), got (", min_8bit, ", ", max_8bit, ")");
}

void check_eps(const char* op, double eps) {
  SGLQ_CHECK(std::isfinite(eps) && eps >= kMinEps && std::isfinite(static_cast<float>(eps)), op,
             ": eps must be a finite float >= 2^-100 (~7.9e-31), got ", eps);
}

// Extent in elements covered by the last two dims of t (0 if empty).
int64_t inner_span(const Tensor& t) {
  const int64_t r = t.size(-2), c = t.size(-1);
  if (r == 0 || c == 0) return 0;
  return (r - 1) * t.stride(-2) + (c - 1) * t.stride(-1) + 1;
}

// The 2-D matrix formed by the last two dims must not overlap itself: row-major
// (stride(-1) == 1, stride(-2) >= cols) or column-major (stride(-2) == 1, stride(-1) >= rows).
bool is_plain_matrix(const Tensor& t) {
  const int64_t r = t.size(-2), c = t.size(-1);
  const int64_t sr = t.stride(-2), sc = t.stride(-1);
  const bool row_major = (c <= 1 || sc == 1) && (r <= 1 || sr >= c);
  const bool col_major = (r <= 1 || sr == 1) && (c <= 1 || sc >= r);
  return row_major || col_major;
}

// output_s of codes shaped like `q_shape` (docs/spec.md §2): fp32 scales, row- or column-major, or packed
// UE8M0 int32 words, column-major. Returns the scale kind.
ScaleKind check_output_s(const char* op, const Tensor& input, const Tensor& output_s,
                         const std::vector<int64_t>& q_shape, int64_t groups, bool scale_ue8m0) {
  SGLQ_CHECK(output_s.defined(), op, ": output_s is undefined");
  check_same_device(op, input, output_s, "output_s");
  const bool packed = output_s.scalar_type() == ScalarType::Int;
  SGLQ_CHECK(packed || output_s.scalar_type() == ScalarType::Float, op,
             ": output_s must be float32 (scales) or int32 (packed UE8M0 scales), got ", output_s.scalar_type());
  SGLQ_CHECK(!packed || scale_ue8m0, op, ": int32 output_s holds packed UE8M0 scales and needs scale_ue8m0=True");
  const int64_t dims = static_cast<int64_t>(q_shape.size());
  SGLQ_CHECK(output_s.dim() == dims, op, ": output_s must have ", dims, " dimensions like input, got shape ",
             output_s.sizes());
  std::vector<int64_t> s_shape = q_shape;
  s_shape.back() = packed ? (groups + 3) / 4 : groups;
  SGLQ_CHECK(same_sizes(output_s, s_shape), op, ": output_s must have shape ", s_shape,
             packed ? " (ceil(G/4) packed words per row)" : " (one scale per group)", ", got ", output_s.sizes());
  for (int64_t d = 0; d < output_s.dim(); ++d) {
    SGLQ_CHECK(output_s.stride(d) >= 0, op, ": output_s must not have negative strides, got ", output_s.strides());
  }
  if (packed) {
    SGLQ_CHECK((output_s.size(-2) <= 1 || output_s.stride(-2) == 1) &&
                   (output_s.size(-1) <= 1 || output_s.stride(-1) >= output_s.size(-2)),
               op, ": packed UE8M0 output_s must be column-major (strides (1, >= M)) as create_scale_tensor makes it, "
               "got strides ", output_s.strides());
  } else {
    SGLQ_CHECK(is_plain_matrix(output_s), op,
               ": output_s must be row-major (strides (>= G, 1)) or column-major (strides (1, >= M)) in its last two "
               "dimensions, got strides ", output_s.strides());
  }
  if (output_s.dim() == 3 && output_s.size(0) > 1) {
    SGLQ_CHECK(output_s.stride(0) >= inner_span(output_s), op, ": output_s experts overlap: stride(0)=",
               output_s.stride(0), " is smaller than one expert's extent ", inner_span(output_s));
  }
  return packed ? ScaleKind::kPackedUE8M0 : (scale_ue8m0 ? ScaleKind::kFloatUE8M0 : ScaleKind::kFloat);
}

// Outputs must not share memory with another argument: the kernels read and write them in parallel, so
// an overlap would give bytes that depend on the schedule and differ between CPU and CUDA (a silent wrong
// answer). Called after the layout checks: every stride is non-negative. The tensors' byte spans decide
// almost every call at once (each span read once: the stable ABI's accessors are calls into torch);
// spans that intersect (interleaved views of one buffer, or a real overlap) are decided exactly from
// each tensor's contiguous runs.
struct Span {
  const Tensor* t;
  const char* name;
  uintptr_t begin = 0, end = 0;  // [begin, end): t's bytes lie in it (empty for an empty or absent t)
};

Span span_of(const Tensor* t, const char* name) {
  Span s{t, name};
  if (t == nullptr) return s;
  const IntArrayRef sizes = t->sizes(), strides = t->strides();
  int64_t last = 0;  // offset of the last element
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return s;  // no elements
    last += (sizes[d] - 1) * strides[d];
  }
  s.begin = reinterpret_cast<uintptr_t>(t->data_ptr());
  s.end = s.begin + static_cast<uintptr_t>(last + 1) * t->element_size();
  return s;
}

struct Runs {
  int64_t bytes = 0;              // every run's length
  std::vector<uintptr_t> starts;  // sorted
};

// t's elements as runs along its innermost unit-stride dimension (whole rows, or whole columns of a
// column-major scale matrix). false when there would be more than `max_runs`.
bool runs_of(const Tensor& t, size_t max_runs, Runs& runs) {
  const IntArrayRef sizes = t.sizes(), strides = t.strides();
  const int64_t dims = static_cast<int64_t>(sizes.size());
  int64_t inner = -1;
  for (int64_t d = dims - 1; d >= 0 && inner < 0; --d) {
    if (sizes[d] > 1 && strides[d] == 1) inner = d;
  }
  const int64_t elem = static_cast<int64_t>(t.element_size()), run = inner >= 0 ? sizes[inner] : 1;
  runs.bytes = run * elem;
  if (static_cast<size_t>(t.numel() / run) > max_runs) return false;
  runs.starts.assign(1, reinterpret_cast<uintptr_t>(t.data_ptr()));
  for (int64_t d = 0; d < dims; ++d) {  // every index of the other dimensions: their offsets added
    if (d == inner || sizes[d] <= 1) continue;
    const size_t before = runs.starts.size();
    for (int64_t i = 1; i < sizes[d]; ++i) {
      const uintptr_t step = static_cast<uintptr_t>(i * strides[d] * elem);
      for (size_t k = 0; k < before; ++k) runs.starts.push_back(runs.starts[k] + step);
    }
  }
  std::sort(runs.starts.begin(), runs.starts.end());
  return true;
}

bool share_bytes(const Span& a, const Span& b) {
  if (a.begin == a.end || b.begin == b.end || a.end <= b.begin || b.end <= a.begin) return false;
  constexpr size_t kMaxRuns = size_t{1} << 20;  // beyond that, intersecting spans count as an overlap
  Runs ra, rb;
  if (!runs_of(*a.t, kMaxRuns, ra) || !runs_of(*b.t, kMaxRuns, rb)) return true;
  // Both start lists are sorted and each list's runs have one length, so their ends are sorted too: a
  // run that ends before the other list's current run starts ends before all its later runs as well.
  for (size_t i = 0, j = 0; i < ra.starts.size() && j < rb.starts.size();) {
    if (ra.starts[i] + ra.bytes <= rb.starts[j]) {
      ++i;
    } else if (rb.starts[j] + rb.bytes <= ra.starts[i]) {
      ++j;
    } else {
      return true;
    }
  }
  return false;
}

// args: the arguments read only, then those written (from index first_written on; absent ones as
// nullptr). Each written one is checked against every argument before it.
template <size_t N>
void check_no_overlap(const char* op, const std::pair<const Tensor*, const char*> (&args)[N], size_t first_written) {
  Span spans[N];
  for (size_t i = 0; i < N; ++i) spans[i] = span_of(args[i].first, args[i].second);
  for (size_t w = first_written; w < N; ++w) {
    for (size_t o = 0; o < w; ++o) {
      SGLQ_CHECK(!share_bytes(spans[w], spans[o]), op, ": ", spans[w].name, " overlaps ", spans[o].name,
                 " in memory; an output must not share memory with another argument");
    }
  }
}

// The CUDA kernels count tasks in 32 bits: one per group, and for dense packed UE8M0 scales at most a
// row's groups padded to whole scale words (four groups each; kTaskColumnLog2).
void check_group_count(const char* op, const QuantParams& p) {
  const bool packed = p.scale_kind == ScaleKind::kPackedUE8M0;
  const int64_t tasks = p.num_rows() * (packed ? (p.groups_per_row + 3) / 4 * 4 : p.groups_per_row);
  SGLQ_CHECK(tasks < (int64_t{1} << 31), op, ": too many groups (", p.num_groups(),
             packed ? ", padded to whole packed scale words: " : "", packed ? std::to_string(tasks) : "",
             "); at most 2^31 - 1 per call");
}

}  // namespace

bool is_bf16(const Tensor& input) { return input.scalar_type() == ScalarType::BFloat16; }
bool is_fp8(const Tensor& output_q) { return output_q.scalar_type() == ScalarType::Float8_e4m3fn; }

namespace {

QuantParams v2_params(const char* op, const Tensor& input, const Tensor& output_q, const Tensor& output_s,
                      int64_t group_size, double eps, double min_8bit, double max_8bit, bool scale_ue8m0,
                      bool fuse_silu_and_mul, const std::optional<Tensor>& masked_m) {
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  SGLQ_CHECK(input.dim() == 2 || input.dim() == 3, op, ": input must be 2-D [M, H] or 3-D [E, M, H], got shape ",
             input.sizes());
  check_input(op, input);
  const bool masked = masked_m.has_value() && masked_m->defined();
  SGLQ_CHECK(!masked || input.dim() == 3, op, ": masked_m requires a 3-D input [E, M_pad, H], got shape ",
             input.sizes());
  check_group_size(op, group_size);

  const int64_t in_last = input.size(-1);
  SGLQ_CHECK(!fuse_silu_and_mul || in_last % 2 == 0, op,
             ": with fuse_silu_and_mul=True input's last dimension must be 2*H (even), got ", in_last);
  const int64_t hidden = fuse_silu_and_mul ? in_last / 2 : in_last;
  SGLQ_CHECK(hidden % group_size == 0, op, ": hidden size H=", hidden, " must be divisible by group_size=",
             group_size, fuse_silu_and_mul ? " (H is half of input's last dimension with fuse_silu_and_mul)" : "");
  SGLQ_CHECK(hidden <= std::numeric_limits<int32_t>::max(), op, ": hidden size H=", hidden, " is too large");
  const int64_t groups = hidden / group_size;

  std::vector<int64_t> q_shape = input.sizes().vec();
  q_shape.back() = hidden;
  const int64_t q_row_stride = check_codes_tensor(op, input, output_q, q_shape);
  check_codes(op, output_q, min_8bit, max_8bit);
  check_eps(op, eps);
  const ScaleKind scale_kind = check_output_s(op, input, output_s, q_shape, groups, scale_ue8m0);

  if (masked) {
    const Tensor& m = *masked_m;
    check_same_device(op, input, m, "masked_m");
    SGLQ_CHECK(m.scalar_type() == ScalarType::Int, op, ": masked_m must be int32, got ", m.scalar_type());
    SGLQ_CHECK(m.dim() == 1 && m.size(0) == input.size(0), op, ": masked_m must have shape [E] = [", input.size(0),
               "], got ", m.sizes());
    SGLQ_CHECK(m.is_contiguous(), op, ": masked_m must be contiguous");
    // the kernels keep a prefix sum of the counts in shared memory (4 bytes per expert, <= 200 KiB)
    SGLQ_CHECK(input.size(0) <= kMaxMaskedExperts, op, ": the masked layout supports at most ", kMaxMaskedExperts,
               " experts, got ", input.size(0));
  }

  const std::pair<const Tensor*, const char*> v2_args[] = {
      {&input, "input"}, {masked ? &*masked_m : nullptr, "masked_m"}, {&output_q, "output_q"}, {&output_s, "output_s"}};
  check_no_overlap(op, v2_args, 2);

  QuantParams p;
  p.input = input.data_ptr();
  p.output_q = output_q.data_ptr();
  p.output_s = output_s.data_ptr();
  p.masked_m = masked ? static_cast<const int32_t*>(masked_m->data_ptr()) : nullptr;
  const bool three_d = input.dim() == 3;
  p.num_outer = three_d ? input.size(0) : 1;
  p.rows_per_outer = input.size(-2);
  p.in_outer_stride = three_d ? input.stride(0) : 0;
  p.in_row_stride = input.stride(-2);
  p.s_outer_stride = three_d ? output_s.stride(0) : 0;
  p.s_row_stride = output_s.stride(-2);
  p.s_group_stride = output_s.stride(-1);
  p.hidden = static_cast<int32_t>(hidden);
  p.groups_per_row = static_cast<int32_t>(groups);
  p.group_size = static_cast<int32_t>(group_size);
  p.eps = static_cast<float>(eps);
  p.scale_kind = scale_kind;
  p.fuse_silu_and_mul = fuse_silu_and_mul;
  p.q_row_stride = static_cast<int32_t>(q_row_stride);
  check_group_count(op, p);
  return p;
}

}  // namespace

QuantParams make_v2_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s, int64_t group_size,
                           double eps, double min_8bit, double max_8bit, bool scale_ue8m0, bool fuse_silu_and_mul,
                           const std::optional<Tensor>& masked_m) {
  return v2_params("sgl_quant.per_token_group_quant_8bit_v2", input, output_q, output_s, group_size, eps, min_8bit,
                   max_8bit, scale_ue8m0, fuse_silu_and_mul, masked_m);
}

QuantParams make_packed_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s, int64_t group_size,
                               double eps, double min_8bit, double max_8bit) {
  constexpr const char* op = "sgl_quant.per_token_group_quant_8bit_packed";
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  SGLQ_CHECK(input.dim() == 2, op, ": input must be 2-D [M, H], got shape ", input.sizes());
  SGLQ_CHECK(output_s.defined() && output_s.scalar_type() == ScalarType::Int, op,
             ": output_s must be int32 (packed UE8M0 scales)", output_s.defined() ? ", got " : "",
             output_s.defined() ? torch::headeronly::toString(output_s.scalar_type()) : "");
  SGLQ_CHECK(group_size == 128, op, ": group_size must be 128 (as in vLLM's packed op), got ", group_size);
  QuantParams p =
      v2_params(op, input, output_q, output_s, group_size, eps, min_8bit, max_8bit, true, false, std::nullopt);
  const int64_t rows = input.size(0), padded_rows = (rows + 3) / 4 * 4;
  SGLQ_CHECK(output_s.size(1) <= 1 || output_s.stride(1) == padded_rows, op,
             ": output_s must have strides (1, ceil4(M)) = (1, ", padded_rows,
             "), the TMA-aligned layout whose padding rows this op writes, got strides ", output_s.strides());
  p.s_pad_rows = static_cast<int32_t>(padded_rows - rows);
  return p;
}

QuantParams make_dsv4_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s) {
  constexpr const char* op = "sgl_quant.per_token_group_quant_fp8_dsv4";
  constexpr int64_t kGroup = 128;
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  SGLQ_CHECK(input.dim() == 3, op, ": input must be 3-D [T, G, D], got shape ", input.sizes());
  check_input(op, input);
  const int64_t T = input.size(0), Gh = input.size(1), D = input.size(2);
  SGLQ_CHECK(D % kGroup == 0, op, ": input's last dimension D=", D, " must be a multiple of 128");
  SGLQ_CHECK(D <= std::numeric_limits<int32_t>::max(), op, ": D=", D, " is too large");

  check_dense_tensor(op, input, output_q, "output_q", input.sizes().vec());
  SGLQ_CHECK(is_fp8(output_q), op, ": output_q must be float8_e4m3fn, got ", output_q.scalar_type());

  SGLQ_CHECK(output_s.defined(), op, ": output_s is undefined");
  check_same_device(op, input, output_s, "output_s");
  SGLQ_CHECK(output_s.scalar_type() == ScalarType::Float, op, ": output_s must be float32, got ",
             output_s.scalar_type());
  const int64_t K = D / kGroup;
  SGLQ_CHECK(output_s.dim() == 3 && output_s.size(0) == T && output_s.size(1) == Gh && output_s.size(2) == K, op,
             ": output_s must have shape [T, G, D/128] = [", T, ", ", Gh, ", ", K, "], got ", output_s.sizes());
  const bool einsum_layout = (T <= 1 || output_s.stride(0) == K) && (Gh <= 1 || output_s.stride(1) == T * K) &&
                             (K <= 1 || output_s.stride(2) == 1);
  SGLQ_CHECK(output_s.numel() == 0 || einsum_layout, op,
             ": output_s must have the fp8_einsum layout, strides (D/128, T*D/128, 1) = (", K, ", ", T * K,
             ", 1), got ", output_s.strides());
  const std::pair<const Tensor*, const char*> dsv4_args[] = {
      {&input, "input"}, {&output_q, "output_q"}, {&output_s, "output_s"}};
  check_no_overlap(op, dsv4_args, 1);

  QuantParams p;
  p.input = input.data_ptr();
  p.output_q = output_q.data_ptr();
  p.output_s = output_s.data_ptr();
  p.num_outer = T;
  p.rows_per_outer = Gh;
  p.in_outer_stride = input.stride(0);
  p.in_row_stride = input.stride(1);
  p.s_outer_stride = K;
  p.s_row_stride = T * K;
  p.s_group_stride = 1;
  p.hidden = static_cast<int32_t>(D);
  p.groups_per_row = static_cast<int32_t>(K);
  p.group_size = static_cast<int32_t>(kGroup);
  p.eps = 1e-10f;
  p.scale_kind = ScaleKind::kFloatUE8M0;
  p.fuse_silu_and_mul = false;
  p.q_row_stride = static_cast<int32_t>(D);
  check_group_count(op, p);
  return p;
}

namespace {

// A contiguous tensor of `numel` elements of `dtype` on input's device (scales, zero points, scale_ub).
void check_vector(const char* op, const Tensor& input, const Tensor& t, const char* name, ScalarType dtype,
                  int64_t numel, const char* shapes) {
  SGLQ_CHECK(t.defined(), op, ": ", name, " is undefined");
  SGLQ_CHECK(t.scalar_type() == dtype, op, ": ", name, " must be ", dtype, ", got ", t.scalar_type());
  check_same_device(op, input, t, name);
  SGLQ_CHECK(t.numel() == numel, op, ": ", name, " must have ", numel, " element", numel == 1 ? "" : "s", " (", shapes,
             "), got shape ", t.sizes());
  SGLQ_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous, got strides ", t.strides());
}


// What the fused ops share (docs/spec.md §6.1, §8.3): input [M, H] (rows strided, H a multiple of `multiple`, at
// most kMaxRmsNormHidden), weight [H], residual and output_normed contiguous [M, H] of input's dtype, output_q
// [M, H] with rows strided (its code type: the caller's check), all at any address; `quant` of the result
// describes input and output_q.
RmsNormQuantParams rmsnorm_common(const char* op, const Tensor& input, const Tensor& weight,
                                  const std::optional<Tensor>& residual, const Tensor& output_q,
                                  const std::optional<Tensor>& output_normed, double norm_eps, int64_t multiple,
                                  const char* multiple_of) {
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  SGLQ_CHECK(input.dim() == 2, op, ": input must be 2-D [M, H], got shape ", input.sizes());
  check_input(op, input);
  const int64_t M = input.size(0), H = input.size(1);
  SGLQ_CHECK(H % multiple == 0, op, ": hidden size H=", H, " must be divisible by ", multiple_of, "=", multiple);
  SGLQ_CHECK(H <= kMaxRmsNormHidden, op, ": hidden size H=", H, " is too large (at most ", kMaxRmsNormHidden, ")");

  check_dense_tensor(op, input, weight, "weight", {H}, input.scalar_type());
  const bool has_residual = residual.has_value() && residual->defined();
  if (has_residual) check_dense_tensor(op, input, *residual, "residual", {M, H}, input.scalar_type());
  const bool has_normed = output_normed.has_value() && output_normed->defined();
  if (has_normed) check_dense_tensor(op, input, *output_normed, "output_normed", {M, H}, input.scalar_type());
  SGLQ_CHECK(std::isfinite(norm_eps) && norm_eps > 0 && static_cast<float>(norm_eps) > 0 &&
                 std::isfinite(static_cast<float>(norm_eps)), op,
             ": norm_eps must be a finite float > 0, got ", norm_eps);
  const int64_t q_row_stride = check_codes_tensor(op, input, output_q, {M, H});

  RmsNormQuantParams r;
  QuantParams& p = r.quant;
  p.input = input.data_ptr();
  p.output_q = output_q.data_ptr();
  p.num_outer = 1;
  p.rows_per_outer = M;
  p.in_row_stride = input.stride(0);
  p.hidden = static_cast<int32_t>(H);
  p.q_row_stride = static_cast<int32_t>(q_row_stride);
  r.weight = weight.data_ptr();
  r.residual = has_residual ? residual->data_ptr() : nullptr;
  r.output_normed = has_normed ? output_normed->data_ptr() : nullptr;
  r.norm_eps = static_cast<float>(norm_eps);
  return r;
}

// Residual and the outputs, each against every argument before it (residual's element is read and then
// written by one thread: only its overlap with another argument matters). `scale`: read only (absent: null).
void check_rmsnorm_overlaps(const char* op, const Tensor& input, const Tensor& weight, const std::optional<Tensor>& residual,
                            const Tensor& output_q, const Tensor& output_s, const char* output_s_name,
                            const std::optional<Tensor>& output_normed, const Tensor* scale) {
  const bool has_residual = residual.has_value() && residual->defined();
  const bool has_normed = output_normed.has_value() && output_normed->defined();
  const std::pair<const Tensor*, const char*> args[] = {
      {&input, "input"},       {&weight, "weight"}, {scale, "scale_ub"},
      {has_residual ? &*residual : nullptr, "residual"},
      {&output_q, "output_q"}, {&output_s, output_s_name},
      {has_normed ? &*output_normed : nullptr, "output_normed"}};
  check_no_overlap(op, args, 3);
}

}  // namespace

RmsNormQuantParams make_rmsnorm_params(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& residual,
                                       const Tensor& output_q, const Tensor& output_s,
                                       const std::optional<Tensor>& output_normed, int64_t group_size,
                                       double norm_eps, double eps, double min_8bit, double max_8bit,
                                       bool scale_ue8m0) {
  constexpr const char* op = "sgl_quant.rmsnorm_per_token_group_quant_8bit";
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  check_group_size(op, group_size);
  RmsNormQuantParams r =
      rmsnorm_common(op, input, weight, residual, output_q, output_normed, norm_eps, group_size, "group_size");
  check_codes(op, output_q, min_8bit, max_8bit);
  check_eps(op, eps);
  QuantParams& p = r.quant;
  const int64_t groups = p.hidden / group_size;
  p.scale_kind = check_output_s(op, input, output_s, {p.rows_per_outer, p.hidden}, groups, scale_ue8m0);
  check_rmsnorm_overlaps(op, input, weight, residual, output_q, output_s, "output_s", output_normed, nullptr);
  p.output_s = output_s.data_ptr();
  p.s_row_stride = output_s.stride(0);
  p.s_group_stride = output_s.stride(1);
  p.groups_per_row = static_cast<int32_t>(groups);
  p.group_size = static_cast<int32_t>(group_size);
  p.eps = static_cast<float>(eps);
  check_group_count(op, p);
  return r;
}

RmsNormQuantParams make_rmsnorm_scaled_params(const char* op, const Tensor& input, const Tensor& weight,
                                              const std::optional<Tensor>& residual, const Tensor& output_q,
                                              const Tensor& scale, const std::optional<Tensor>& output_normed,
                                              const std::optional<Tensor>& scale_ub, double norm_eps, double eps,
                                              bool is_static) {
  RmsNormQuantParams r = rmsnorm_common(op, input, weight, residual, output_q, output_normed, norm_eps,
                                        kElemsPerChunk, "16 (the kernels' chunk)");
  check_code_dtype(op, output_q);
  QuantParams& p = r.quant;
  const bool has_ub = scale_ub.has_value() && scale_ub->defined();
  if (is_static) {
    check_vector(op, input, scale, "scale", ScalarType::Float, 1, "the tensor's scale: [] or [1]");
    if (scale.is_cpu()) {  // on a GPU the kernel's rule applies: reading it would synchronize
      const float s = *static_cast<const float*>(scale.data_ptr());
      SGLQ_CHECK(usable_static_scale(s), op, ": scale must be a positive finite float, got ", static_cast<double>(s));
    }
  } else {
    check_vector(op, input, scale, "output_s", ScalarType::Float, p.rows_per_outer, "one scale per row: [M, 1] or [M]");
    check_eps(op, eps);
    if (has_ub) check_vector(op, input, *scale_ub, "scale_ub", ScalarType::Float, 1, "[] or [1]");
  }
  check_rmsnorm_overlaps(op, input, weight, residual, output_q, scale, is_static ? "scale" : "output_s", output_normed,
                         has_ub ? &*scale_ub : nullptr);
  p.output_s = is_static ? nullptr : scale.data_ptr();
  p.s_row_stride = 1;
  p.groups_per_row = p.hidden / kElemsPerChunk;
  p.group_size = kElemsPerChunk;
  p.eps = static_cast<float>(eps);
  r.scaled = true;
  r.granularity = is_static ? Granularity::kPerTensorStatic : Granularity::kPerToken;
  r.scale = is_static ? static_cast<const float*>(scale.data_ptr())
                      : (has_ub ? static_cast<const float*>(scale_ub->data_ptr()) : nullptr);
  return r;
}

namespace {

// What the per-token and per-tensor ops share: input [..., K] (K = H, or 2H with fused SiLU) whose leading
// dimensions flatten to rows of one stride, last dimension contiguous, any 2-byte-aligned address (the
// kernels check each row's alignment); output_q contiguous [..., H] fp8 or int8.
ScaledQuantParams scaled_common(const char* op, const Tensor& input, const Tensor& output_q, double eps,
                                bool fuse_silu_and_mul) {
  SGLQ_CHECK(input.defined(), op, ": input is undefined");
  SGLQ_CHECK(is_16bit_float(input), op, ": input must be bfloat16 or float16, got ", input.scalar_type());
  SGLQ_CHECK(input.dim() >= 1, op, ": input must have at least one dimension [..., H], got a scalar");
  const int64_t last = input.size(-1);
  SGLQ_CHECK(!fuse_silu_and_mul || last % 2 == 0, op,
             ": with fuse_silu_and_mul=True input's last dimension must be 2*H (even), got ", last);
  const int64_t hidden = fuse_silu_and_mul ? last / 2 : last;
  SGLQ_CHECK(hidden <= std::numeric_limits<int32_t>::max(), op, ": hidden size H=", hidden, " is too large");
  const int64_t rows = last == 0 ? 0 : input.numel() / last;
  SGLQ_CHECK(hidden > 0 || input.numel() == 0, op, ": input's last dimension must not be 0 unless input is empty, got shape ",
             input.sizes());
  int64_t row_stride = input.dim() >= 2 ? input.stride(-2) : last;
  if (input.numel() > 0) {
    SGLQ_CHECK(last <= 1 || input.stride(-1) == 1, op, ": input's last dimension must be contiguous (stride 1), got strides ",
               input.strides());
    // the leading dimensions (sizes 1 skipped) must step through rows of one stride, each row after the last
    int64_t expected = -1;
    for (int64_t d = input.dim() - 2; d >= 0; --d) {
      if (input.size(d) == 1) continue;
      if (expected < 0) {
        row_stride = input.stride(d);
        SGLQ_CHECK(row_stride >= last, op, ": input's rows must not overlap (row stride >= ", last, "), got strides ",
                   input.strides());
      } else {
        SGLQ_CHECK(input.stride(d) == expected, op, ": input's leading dimensions must flatten to rows of one stride "
                   "(as a reshape to [M, K] would need no copy), got shape ", input.sizes(), " and strides ",
                   input.strides());
      }
      expected = input.stride(d) * input.size(d);
    }
  }
  std::vector<int64_t> q_shape = input.sizes().vec();
  q_shape.back() = hidden;
  SGLQ_CHECK(output_q.defined(), op, ": output_q is undefined");
  check_same_device(op, input, output_q, "output_q");
  check_code_dtype(op, output_q);
  SGLQ_CHECK(same_sizes(output_q, q_shape), op, ": output_q must have shape ", q_shape, ", got ", output_q.sizes());
  SGLQ_CHECK(output_q.is_contiguous(), op, ": output_q must be contiguous, got strides ", output_q.strides());
  check_eps(op, eps);

  ScaledQuantParams p;
  p.input = input.data_ptr();
  p.output_q = output_q.data_ptr();
  p.num_rows = rows;
  p.in_row_stride = row_stride;
  p.q_row_stride = hidden;
  p.hidden = static_cast<int32_t>(hidden);
  p.eps = static_cast<float>(eps);
  p.fuse_silu_and_mul = fuse_silu_and_mul;
  return p;
}

}  // namespace

ScaledQuantParams make_per_token_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s,
                                        const std::optional<Tensor>& output_azp, const std::optional<Tensor>& scale_ub,
                                        double eps, bool fuse_silu_and_mul) {
  constexpr const char* op = "sgl_quant.per_token_quant_8bit";
  ScaledQuantParams p = scaled_common(op, input, output_q, eps, fuse_silu_and_mul);
  check_vector(op, input, output_s, "output_s", ScalarType::Float, p.num_rows, "one scale per row: [M, 1] or [M]");
  const bool asym = output_azp.has_value() && output_azp->defined();
  const bool has_ub = scale_ub.has_value() && scale_ub->defined();
  if (asym) {
    SGLQ_CHECK(!is_fp8(output_q), op, ": output_azp (asymmetric quantization) needs int8 output_q, got ",
               output_q.scalar_type());
    SGLQ_CHECK(!has_ub, op, ": scale_ub applies to symmetric quantization only; got it with output_azp");
    check_vector(op, input, *output_azp, "output_azp", ScalarType::Int, p.num_rows,
                 "one zero point per row: [M, 1] or [M]");
  }
  if (has_ub) check_vector(op, input, *scale_ub, "scale_ub", ScalarType::Float, 1, "[] or [1]");
  const std::pair<const Tensor*, const char*> args[] = {{&input, "input"},
                                                        {has_ub ? &*scale_ub : nullptr, "scale_ub"},
                                                        {&output_q, "output_q"},
                                                        {&output_s, "output_s"},
                                                        {asym ? &*output_azp : nullptr, "output_azp"}};
  check_no_overlap(op, args, 2);
  p.output_s = static_cast<float*>(output_s.data_ptr());
  p.output_azp = asym ? static_cast<int32_t*>(output_azp->data_ptr()) : nullptr;
  p.scale_ub = has_ub ? static_cast<const float*>(scale_ub->data_ptr()) : nullptr;
  p.s_row_stride = 1;
  p.granularity = asym ? Granularity::kPerTokenAsym : Granularity::kPerToken;
  return p;
}

ScaledQuantParams make_per_tensor_params(const Tensor& input, const Tensor& output_q, const Tensor& output_s,
                                         bool is_static, double eps, bool fuse_silu_and_mul) {
  constexpr const char* op = "sgl_quant.per_tensor_quant_8bit";
  ScaledQuantParams p = scaled_common(op, input, output_q, eps, fuse_silu_and_mul);
  check_vector(op, input, output_s, "output_s", ScalarType::Float, 1, "the tensor's scale: [] or [1]");
  if (is_static && output_s.is_cpu()) {  // on a GPU the kernel's rule applies: reading it would synchronize
    const float s = *static_cast<const float*>(output_s.data_ptr());
    SGLQ_CHECK(usable_static_scale(s), op, ": the static scale (output_s) must be a positive finite float, got ",
               static_cast<double>(s));
  }
  const std::pair<const Tensor*, const char*> args[] = {
      {&input, "input"}, {&output_q, "output_q"}, {&output_s, "output_s"}};
  check_no_overlap(op, args, 1);
  p.output_s = static_cast<float*>(output_s.data_ptr());
  p.static_scale = is_static ? p.output_s : nullptr;
  p.granularity = is_static ? Granularity::kPerTensorStatic : Granularity::kPerTensorDynamic;
  return p;
}

}  // namespace sgl_quant
