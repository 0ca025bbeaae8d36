// Loading a rank's slices of HF safetensors and saving whole HF tensors from the shards (what and why: shard_io.h).
#include "parallel/shard_io.h"

#include <algorithm>
#include <vector>

#include "model/safetensors.h"
#include "parallel/shard_weights.h"
#include "runtime/error.h"

namespace hone {

namespace {

// The whole parameters of the layout, in the table's order: what the files hold.
std::vector<ParamSpec> whole_specs(const ShardLayout& layout) {
  std::vector<ParamSpec> specs;
  for (const ParamShard& p : layout.params()) specs.push_back(p.spec);
  return specs;
}

void check_shard_weights(const ModelWeights& local, const ShardLayout& layout) {
  HONE_CHECK(local.flat.numel() == layout.num_local_params(), "shard weights of ", local.flat.numel(),
             " parameters, the layout has ", layout.num_local_params());
  for (const ParamShard& p : layout.params())
    HONE_CHECK(local.param(p.spec).shape() == p.local_shape, p.spec.name, ": shard weights of shape ",
               local.param(p.spec).shape_string(), ", the layout's is ",
               Tensor::view(nullptr, p.local_shape, DType::f32).shape_string());
}

}  // namespace

void load_shard_weights(ModelWeights& local, const ShardLayout& layout, const ModelConfig& c, const std::string& dir) {
  if (!local.flat.defined()) local = allocate_shard_weights(layout, c);
  check_shard_weights(local, layout);
  const SafetensorsCheckpoint ckpt(dir);
  // The whole model's tensors (a pipeline stage reads only its own), before any read: nothing below throws for it.
  check_checkpoint_params(ckpt, param_table(c), c, dir);
  for (const ParamShard& p : layout.params()) {
    const std::string& name = p.spec.name;
    float* dst = local.param(p.spec).f32();
    const std::vector<ShardRun> runs = ShardLayout::runs(p);
    // A column split (o_proj, down_proj) is one short run per row: those are spread over threads; a row split or a
    // whole tensor is one or two long runs that read_f32 converts in parallel itself.
#pragma omp parallel for schedule(static) if (runs.size() > 64)
    for (size_t k = 0; k < runs.size(); ++k) {
      const ShardRun& r = runs[k];
      if (r.valid) ckpt.read_f32(name, r.whole, r.n, dst + r.local);
      else std::fill(dst + r.local, dst + r.local + r.n, 0.f);
    }
  }
}

void save_model_from_shards(const ModelWeights& local, const ShardLayout& layout, const ModelConfig& c, Comm& tp,
                            const std::string& dir, DType dtype, int64_t max_shard_bytes) {
  check_shard_weights(local, layout);
  HONE_CHECK(layout.whole_model(), "saving from the shards of one pipeline stage (gather_model_flat gathers stages)");
  // Checked on every rank before any message, so that a bad argument fails every rank alike instead of leaving the
  // senders waiting for a writer that gave up.
  HONE_USER_CHECK(dtype == DType::f32 || dtype == DType::bf16, "models are saved in f32 or bf16, not ",
                  dtype_name(dtype));
  HONE_USER_CHECK(max_shard_bytes > 0, "max shard size must be positive (got ", max_shard_bytes, ")");
  ShardGatherer gatherer(c, layout, tp, /*root=*/0);  // checks that tp is the layout's group
  if (tp.size() == 1) {
    save_model(local, c, dir, dtype, max_shard_bytes);
    return;
  }
  auto slice = [&](size_t i) { return local.param(layout.params()[i].spec).f32(); };
  if (tp.rank() != 0) {
    for (size_t i = 0; i < layout.params().size(); ++i) gatherer.gather(i, slice(i), nullptr);
    return;
  }
  const std::vector<ParamSpec> specs = whole_specs(layout);
  int64_t largest = 0;
  for (const ParamSpec& s : specs) largest = std::max(largest, s.numel());
  std::vector<float> whole(static_cast<size_t>(largest));  // one whole parameter at a time, sized once for the largest
  save_model_streaming(specs, c, dir, dtype, max_shard_bytes, [&](size_t i) {
    gatherer.gather(i, slice(i), whole.data());
    return Tensor::view(whole.data(), specs[i].shape, DType::f32);
  });
}

}  // namespace hone
