// The GPU engine's pipeline on one GPU: two stages of a 4-layer model run by two threads with their own streams,
// whose device Comm passes the bf16 hidden states and gradients through host mailboxes (pair_p2p_comm.h), against
// the whole model on the same GPU: the training pass (1F1B; interleaved with two chunks per rank) gives the same
// logprobs and gradients (the stages run the same kernels on the same bf16 data; the tied embedding's two copies
// summed here as the embedding group would), the forward-only pass the same logprobs. The resharding refit from the
// two stages' bf16 weights into generation shards (one GPU or two per replica) is bitwise the cast of the whole
// model's slices. NCCL between GPUs is left to mk/gpu-pp-check.sh.
#include <boost/test/unit_test.hpp>

#include "common/gpu.h"

#if HONE_CUDA

#include <cmath>
#include <cstdio>
#include <thread>

#include "cuda/device_memory.h"
#include "gpu_transformer_test_util.h"
#include "model/transformer.h"
#include "pair_p2p_comm.h"
#include "parallel/pipeline_model.h"
#include "parallel/reshard.h"
#include "parallel/shard_weights.h"
#include "runtime/error.h"
#include "tensor/dtype.h"

namespace {

hone::ModelConfig four_layers(hone::Architecture arch, bool tied) {
  hone::ModelConfig c = test::gpu_tiny_config(arch, tied);
  c.num_hidden_layers = 4;
  return c;
}

std::vector<hone::PackedBatch> batches_for(const hone::ModelConfig& c) {
  return {test::gpu_test_batch({37, 9}, c.vocab_size, 3), test::gpu_test_batch({64}, c.vocab_size, 4),
          test::gpu_test_batch({5, 20, 11}, c.vocab_size, 5)};
}

struct Result {
  std::vector<std::vector<float>> logprob, forward_only;  // per micro-batch (the last stage's, for a stage)
  std::vector<float> grads;                                // this stage's layout (or the whole model's)
};

// Device copies of the loss weights of every micro-batch: [dlogprob | dentropy].
std::vector<hone::DeviceArray<float>> loss_weights(const std::vector<hone::PackedBatch>& batches) {
  std::vector<hone::DeviceArray<float>> out;
  for (const hone::PackedBatch& b : batches) {
    const int T = b.num_tokens();
    std::vector<float> h = test::gpu_logprob_weights(T);
    const std::vector<float> e = test::gpu_entropy_weights(T);
    h.insert(h.end(), e.begin(), e.end());
    out.emplace_back(2 * int64_t(T));
    CUDA_CHECK(cudaMemcpy(out.back().get(), h.data(), h.size() * 4, cudaMemcpyHostToDevice));
  }
  return out;
}

Result whole_model(const hone::ModelConfig& c, const hone::ModelWeights& w, const std::vector<hone::PackedBatch>& bs) {
  test::ScopedGpuContext g;
  const hone::ParamLayout layout = hone::ParamLayout::of(c);
  hone::GpuTransformer model(c, layout, g.ctx, 64);
  model.upload_weights(w);
  const auto lw = loss_weights(bs);
  hone::DeviceArray<float> grads(layout.num_params);
  CUDA_CHECK(cudaMemset(grads.get(), 0, grads.bytes()));
  Result r;
  for (size_t i = 0; i < bs.size(); ++i) {
    model.forward(bs[i], 0.9f, true);
    r.logprob.push_back(model.logprobs_host());
    const int T = bs[i].num_tokens();
    model.backward(lw[i].get(), lw[i].get() + T, grads.get());
  }
  r.grads = test::download_f32(grads.get(), layout.num_params);
  for (const hone::PackedBatch& b : bs) {
    model.forward(b, 0.9f, false, false);
    r.forward_only.push_back(model.logprobs_host());
  }
  return r;
}

Result stage(const hone::ModelConfig& c, const hone::ModelWeights& whole, const std::vector<hone::PackedBatch>& bs,
             int vpp, test::Mailboxes& boxes, int rank) {
  test::ScopedGpuContext g;
  const hone::PipelineLayout pipe = hone::PipelineLayout::of(c.num_hidden_layers, 2, vpp);
  const hone::ShardLayout L = hone::ShardLayout::of(c, 1, 0, &pipe, rank);
  hone::ModelWeights w = hone::allocate_shard_weights(L, c);
  hone::extract_shard(L, whole, w);
  hone::DeviceArray<hone::bf16> weights(L.num_local_params());
  {
    hone::GpuTransformer uploader(c, L.param_layout(), g.ctx, 8, nullptr, hone::ModelSpan{0, 0, false, false},
                                  weights.get());
    uploader.upload_weights(w);
  }
  test::PairP2pComm pp(boxes, rank, g.ctx.stream);
  hone::GpuPipelineModel model(c, L, weights.get(), g.ctx, 64, nullptr, pp);
  const auto lw = loss_weights(bs);
  hone::DeviceArray<float> grads(L.num_local_params());
  CUDA_CHECK(cudaMemset(grads.get(), 0, grads.bytes()));
  std::vector<const hone::PackedBatch*> ptrs;
  for (const hone::PackedBatch& b : bs) ptrs.push_back(&b);
  Result r;
  r.logprob.resize(bs.size());
  auto loss = [&](int i, const hone::GpuTransformer& head) {
    r.logprob[size_t(i)] = head.logprobs_host();
    const int T = bs[size_t(i)].num_tokens();
    return hone::GpuPipelineModel::LossGrads{lw[size_t(i)].get(), lw[size_t(i)].get() + T};
  };
  const hone::PipelineRunStats stats = model.train(ptrs, 0.9f, loss, grads.get());
  BOOST_TEST(stats.messages_sent == int64_t(bs.size()) * (2 * vpp - 1));
  r.grads = test::download_f32(grads.get(), L.num_local_params());
  model.logprobs(ptrs, 0.9f, r.forward_only);
  return r;
}

void check(hone::Architecture arch, bool tied, int vpp) {
  const hone::ModelConfig c = four_layers(arch, tied);
  const hone::ModelWeights w = test::gpu_test_weights(c, 17);
  const std::vector<hone::PackedBatch> bs = batches_for(c);
  const Result one = whole_model(c, w, bs);
  test::Mailboxes boxes;
  Result part[2];
  std::thread t1([&] { part[1] = stage(c, w, bs, vpp, boxes, 1); });
  part[0] = stage(c, w, bs, vpp, boxes, 0);
  t1.join();

  // The last stage's logprobs, from training and from the forward-only pass.
  for (size_t i = 0; i < bs.size(); ++i) {
    double train = 0, fwd = 0;
    for (size_t t = 0; t < one.logprob[i].size(); ++t) {
      train = std::max(train, double(std::fabs(part[1].logprob[i][t] - one.logprob[i][t])));
      fwd = std::max(fwd, double(std::fabs(part[1].forward_only[i][t] - one.forward_only[i][t])));
    }
    std::printf("pp=2 (vpp %d, %s%s) micro-batch %zu: logprob max diff %.3g (training), %.3g (forward only)\n", vpp,
                hone::architecture_hf_name(arch), tied ? ", tied" : "", i, train, fwd);
    BOOST_TEST(train <= 1e-3);
    BOOST_TEST(fwd <= 1e-3);
  }
  // Every parameter's gradient from the stage holding it; the tied embedding's two copies summed.
  const hone::PipelineLayout pipe = hone::PipelineLayout::of(c.num_hidden_layers, 2, vpp);
  int64_t whole_off = 0;
  for (const hone::ParamSpec& spec : hone::param_table(c)) {
    std::vector<float> sum(size_t(spec.numel()), 0.f);
    for (int s = 0; s < 2; ++s) {
      const hone::ShardLayout L = hone::ShardLayout::of(c, 1, 0, &pipe, s);
      if (const hone::ParamShard* p = L.try_find(spec.name))
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[s].grads[size_t(p->offset) + i];
    }
    const double rel = test::rel_l2_of(sum.data(), one.grads.data() + whole_off, spec.numel());
    BOOST_TEST_INFO(spec.name);
    BOOST_TEST(rel <= 1e-2);
    whole_off += spec.numel();
  }
}

// Stages' bf16 weights -> generation shards over the pair; expect the bf16 cast of the whole model's slices.
void check_reshard(bool tied, int tg) {
  hone::ModelConfig c = four_layers(hone::Architecture::qwen3, tied);
  c.vocab_size = 301;  // padded at generation.tp = 2
  const hone::ModelWeights whole = test::gpu_test_weights(c, 23);
  const hone::RankGrid grid(2, 1, 2);
  const hone::PipelineLayout pipe = hone::PipelineLayout::of(c.num_hidden_layers, 2);
  test::Mailboxes boxes;
  std::vector<uint16_t> got[2], want[2];
  auto rank_fn = [&](int rank) {
    test::ScopedGpuContext g;
    const hone::ShardLayout L = hone::ShardLayout::of(c, 1, 0, &pipe, rank);
    hone::ModelWeights w = hone::allocate_shard_weights(L, c);
    hone::extract_shard(L, whole, w);
    std::vector<uint16_t> train(size_t(L.num_local_params()));
    for (size_t i = 0; i < train.size(); ++i) train[i] = hone::f32_to_bf16(w.flat.f32()[i]);
    hone::DeviceArray<hone::bf16> dtrain(L.num_local_params());
    CUDA_CHECK(cudaMemcpy(dtrain.get(), train.data(), train.size() * 2, cudaMemcpyHostToDevice));
    const hone::ShardLayout G = hone::ShardLayout::of(c, tg, rank % tg);
    hone::DeviceArray<hone::bf16> gen(G.num_local_params());
    CUDA_CHECK(cudaMemset(gen.get(), 0, gen.bytes()));
    test::PairP2pComm world(boxes, rank, g.ctx.stream);
    hone::Resharder<hone::CudaBackend> r(hone::plan_reshard(c, grid, pipe, tg, rank, /*round_elements=*/40000), world,
                                        g.ctx);
    BOOST_TEST(r.plan().rounds.size() > 1u);
    r.run(dtrain.get(), gen.get());
    CUDA_CHECK(cudaStreamSynchronize(g.ctx.stream));
    got[rank].resize(size_t(G.num_local_params()));
    CUDA_CHECK(cudaMemcpy(got[rank].data(), gen.get(), got[rank].size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> expect(size_t(G.num_local_params()));
    hone::extract_shard_flat(G, whole.flat.f32(), expect.data());
    for (float x : expect) want[rank].push_back(hone::f32_to_bf16(x));
  };
  std::thread t1([&] { rank_fn(1); });
  rank_fn(0);
  t1.join();
  for (int r = 0; r < 2; ++r) BOOST_TEST(got[r] == want[r], "rank " << r << ", generation.tp " << tg);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_pipeline)

BOOST_AUTO_TEST_CASE(two_stages_match_the_whole_model_tied, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::qwen3, true, 1);
}
BOOST_AUTO_TEST_CASE(interleaved_stages_match_the_whole_model, *boost::unit_test::precondition(test::needs_gpu)) {
  check(hone::Architecture::llama, false, 2);
}
BOOST_AUTO_TEST_CASE(resharding_refit_is_the_cast_of_the_slices, *boost::unit_test::precondition(test::needs_gpu)) {
  for (bool tied : {true, false})
    for (int tg : {1, 2}) check_reshard(tied, tg);
}

BOOST_AUTO_TEST_SUITE_END()

#endif  // HONE_CUDA
