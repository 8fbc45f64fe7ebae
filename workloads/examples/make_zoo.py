#!/usr/bin/env python3
"""Writes the model-zoo workloads of this folder (resnet50, bert_*, vit_b16, gpt2_*, gpt3_*, llama*, gemma_*, mixtral_8x7b,
deepseek_moe_16b, sd2_unet) from their published architectures, so each JSON is reproducible: python3 workloads/examples/make_zoo.py
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


class Layers:
    def __init__(self):
        self.layers = []

    def add(self, type_, name, **fields):
        layer = {"type": type_, "name": name}
        layer.update(fields)
        self.layers.append(layer)
        return name


def workload(name, description, input_shape, input_dtype, layers, per_replica_batch, optimizer, learning_rate):
    """A training workload around a layer list: mixed precision, 3 steps, an unlimited host."""
    return {
        "name": name,
        "description": description,
        "model": {"input_shape": input_shape, "input_dtype": input_dtype, "layers": layers,
                  "loss": "sparse_categorical_crossentropy"},
        "training": {"per_replica_batch": per_replica_batch, "precision": "mixed_bfloat16",
                     "optimizer": {"name": optimizer, "learning_rate": learning_rate}, "steps": 3},
        "input_pipeline": {"host_samples_per_s": 0, "prefetch_batches": 2},
    }


def resnet50():
    """Keras applications ResNet50 (v1): convolutions with biases, batch norm, bottleneck blocks."""
    m = Layers()
    x = m.add("conv2d", "conv1_conv", filters=64, kernel=7, strides=2)
    return resnet_body(m, x, v15=False)


def resnet50_mlperf():
    """ResNet-50 v1.5 as MLPerf Training's TPU submissions run it: the 3x3 convolution of a
    downsampling block has the stride; no convolution bias (batch norm follows every one); 1001
    classes; LARS; conv1 on the space-to-depth input (the host turns 224x224x3 into 112x112x12,
    and the 7x7/2 convolution becomes a 4x4/1 one, which uses the MXU far better)."""
    m = Layers()
    x = m.add("conv2d", "conv1_conv", filters=64, kernel=4, strides=1, use_bias=False)
    doc = resnet_body(m, x, v15=True)
    doc["name"] = "resnet50_mlperf"
    doc["description"] = ("ResNet-50 v1.5 as MLPerf Training's TPU submissions run it (no convolution bias, stride on the "
                          "3x3 convolution, space-to-depth conv1, 1001 classes, LARS).")
    doc["model"]["input_shape"] = [112, 112, 12]
    doc["training"]["optimizer"] = {"name": "lars", "learning_rate": 0.1}
    return doc


def resnet_body(m, x, v15):
    """Everything after conv1: bottleneck stages and the classifier."""
    bias = {"use_bias": False} if v15 else {}
    x = m.add("batch_norm", "conv1_bn")
    x = m.add("activation", "conv1_relu", activation="relu")
    x = m.add("max_pool", "pool1_pool", pool=3, strides=2)
    for stage, (blocks, filters, stride) in enumerate([(3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2)], start=2):
        for block in range(1, blocks + 1):
            p = f"conv{stage}_block{block}"
            s = stride if block == 1 else 1
            entry = x
            projection = block == 1
            if projection and v15:
                m.add("conv2d", p + "_0_conv", filters=4 * filters, kernel=1, strides=s, inputs=[entry], **bias)
                shortcut = m.add("batch_norm", p + "_0_bn")
            elif not projection:
                shortcut = entry
            m.add("conv2d", p + "_1_conv", filters=filters, kernel=1, strides=1 if v15 else s, inputs=[entry], **bias)
            m.add("batch_norm", p + "_1_bn")
            m.add("activation", p + "_1_relu", activation="relu")
            m.add("conv2d", p + "_2_conv", filters=filters, kernel=3, **({"strides": s} if v15 and s > 1 else {}), **bias)
            m.add("batch_norm", p + "_2_bn")
            m.add("activation", p + "_2_relu", activation="relu")
            if v15:
                m.add("conv2d", p + "_3_conv", filters=4 * filters, kernel=1, **bias)
                y = m.add("batch_norm", p + "_3_bn")
                m.add("add", p + "_add", inputs=[y, shortcut])
            else:
                # In the order Keras lists keras.applications' ResNet50 (by depth in the graph:
                # the shortcut's layers beside the main branch's last), with its Add([shortcut, x]),
                # so that the file matches what model.to_json() gives for it.
                if projection:
                    m.add("conv2d", p + "_0_conv", filters=4 * filters, kernel=1, strides=s, inputs=[entry], **bias)
                m.add("conv2d", p + "_3_conv", filters=4 * filters, kernel=1, inputs=[p + "_2_relu"], **bias)
                if projection:
                    shortcut = m.add("batch_norm", p + "_0_bn", inputs=[p + "_0_conv"])
                y = m.add("batch_norm", p + "_3_bn", inputs=[p + "_3_conv"])
                m.add("add", p + "_add", inputs=[shortcut, y])
            x = m.add("activation", p + "_out", activation="relu")
    m.add("global_avg_pool", "avg_pool")
    m.add("dense", "predictions", units=1001 if v15 else 1000, activation="softmax")
    return workload("resnet50",
                    "ResNet-50 v1 at 224x224 (Keras applications: 25,636,712 parameters), ImageNet classification.",
                    [224, 224, 3], "uint8", m.layers, 128, "momentum", 0.1)


def transformer_block(m, p, width, heads, causal, pre_norm, x):
    """One encoder block: attention and a 4x MLP, each with a residual add."""
    if pre_norm:
        h = m.add("layer_norm", p + "_ln1", inputs=[x])
        h = m.add("attention", p + "_attn", heads=heads, causal=causal)
        x = m.add("add", p + "_res1", inputs=[h, x])
        h = m.add("layer_norm", p + "_ln2")
        h = m.add("dense", p + "_mlp_fc", units=4 * width, activation="gelu")
        h = m.add("dense", p + "_mlp_proj", units=width)
        return m.add("add", p + "_res2", inputs=[h, x])
    h = m.add("attention", p + "_attn", heads=heads, causal=causal, inputs=[x])
    h = m.add("dropout", p + "_attn_dropout", rate=0.1)
    x = m.add("add", p + "_res1", inputs=[h, x])
    x = m.add("layer_norm", p + "_ln1")
    h = m.add("dense", p + "_mlp_fc", units=4 * width, activation="gelu")
    h = m.add("dense", p + "_mlp_proj", units=width)
    h = m.add("dropout", p + "_mlp_dropout", rate=0.1)
    x = m.add("add", p + "_res2", inputs=[h, x])
    return m.add("layer_norm", p + "_ln2")


def bert(size, seq):
    layers, width, heads = {"base": (12, 768, 12), "large": (24, 1024, 16)}[size]
    m = Layers()
    m.add("embedding", "embeddings", vocab=30522, dim=width, positions=512, segments=2)
    m.add("layer_norm", "embeddings_ln")
    x = m.add("dropout", "embeddings_dropout", rate=0.1)
    for i in range(layers):
        x = transformer_block(m, f"layer{i}", width, heads, False, False, x)
    m.add("take_first", "cls")
    m.add("dense", "pooler", units=width, activation="tanh")
    m.add("dense", "classifier", units=2, activation="softmax")
    return workload(f"bert_{size}_{seq}",
                    f"BERT-{size} ({layers} layers, width {width}, {heads} heads) fine-tuned on a 2-class task at sequence {seq}.",
                    [seq], "int32", m.layers, 32 if seq == 128 else 8, "adamw", 2e-5)


def vit_b16():
    m = Layers()
    x = m.add("patch_embedding", "patches", kernel=16, dim=768, class_token=True, positions=197)
    for i in range(12):
        x = transformer_block(m, f"block{i}", 768, 12, False, True, x)
    m.add("layer_norm", "final_ln")
    m.add("take_first", "cls")
    m.add("dense", "head", units=1000, activation="softmax")
    return workload("vit_b16",
                    "ViT-B/16 at 224x224 (12 layers, width 768, 12 heads), ImageNet classification.",
                    [224, 224, 3], "uint8", m.layers, 64, "adamw", 1e-3)


def decoder_layers(layers, width, heads, seq):
    """A GPT-2-style decoder: token and position tables, pre-norm causal blocks, a final norm and
    a head tied to the token table."""
    m = Layers()
    x = m.add("embedding", "wte_wpe", vocab=50257, dim=width, positions=seq)
    for i in range(layers):
        x = transformer_block(m, f"h{i}", width, heads, True, True, x)
    m.add("layer_norm", "ln_f")
    m.add("dense", "lm_head", units=50257, use_bias=False, tied_weights=True, activation="softmax")
    return m.layers


def gpt2(size):
    layers, width, heads = {"small": (12, 768, 12), "medium": (24, 1024, 16)}[size]
    return workload(f"gpt2_{size}",
                    f"GPT-2 {size} ({layers} layers, width {width}, {heads} heads), next-token loss at sequence 1024, head tied to the token table.",
                    [1024], "int32", decoder_layers(layers, width, heads, 1024), 4, "adamw", 3e-4)


# GPT-3's sizes (Brown et al. 2020, table 2.1): layers, width, heads. (The table's 13B width of
# 5140 is not 40 heads of 128; 5120 is.)
GPT3_SIZES = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 16), "1.3b": (24, 2048, 24),
              "2.7b": (32, 2560, 32), "6.7b": (32, 4096, 32), "13b": (40, 5120, 40), "175b": (96, 12288, 96)}


def gpt3(size):
    """GPT-3 as GPT-2 with 2048 positions: pre-norm blocks, dense attention (the paper alternates
    dense and locally banded sparse attention; the sparse layers are not modelled), head tied."""
    layers, width, heads = GPT3_SIZES[size]
    doc = workload(f"gpt3_{size}",
                   f"GPT-3 {size.upper()} ({layers} layers, width {width}, {heads} heads), next-token loss at sequence 2048, "
                   "head tied to the token table. Beyond one chip: shard it (training.fsdp, training.mesh.model).",
                   [2048], "int32", decoder_layers(layers, width, heads, 2048), 2, "adamw", 6e-5)
    doc["training"]["fsdp"] = True
    return doc


# Llama-family shapes: layers, width, query heads, key/value heads, head width, gated MLP width,
# vocabulary, sequence, gate activation, head tied to the token table. Llama 2 (Touvron et al.
# 2023, table 1 and appendix; the released configs), Llama 3 (Meta's model card and the Llama 3
# paper, table 3), Gemma (Gemma Team 2024, table 1: GeGLU, head width 256, multi-query
# attention at 2B, tied embeddings).
LLAMA_SIZES = {
    "llama2_7b": (32, 4096, 32, 32, 128, 11008, 32000, 4096, "silu", False),
    "llama2_70b": (80, 8192, 64, 8, 128, 28672, 32000, 4096, "silu", False),
    "llama3_8b": (32, 4096, 32, 8, 128, 14336, 128256, 8192, "silu", False),
    "llama3_70b": (80, 8192, 64, 8, 128, 28672, 128256, 8192, "silu", False),
    "llama3_405b": (126, 16384, 128, 8, 128, 53248, 128256, 8192, "silu", False),
    "gemma_2b": (18, 2048, 8, 1, 256, 16384, 256000, 8192, "gelu", True),
    "gemma_7b": (28, 3072, 16, 16, 256, 24576, 256000, 8192, "gelu", True),
}


def llama_attention(m, p, x, heads, kv_heads, head_dim, rotary):
    """A Llama-style block's first half: RMSNorm, causal attention without biases (grouped-query
    when kv_heads < heads), the residual add, and the MLP's RMSNorm. Returns the residual stream
    and the MLP's input."""
    h = m.add("rms_norm", p + "_attention_norm", inputs=[x])
    attn = {"heads": heads, "head_dim": head_dim, "causal": True, "rotary": rotary, "use_bias": False}
    if kv_heads != heads:
        attn["kv_heads"] = kv_heads
    h = m.add("attention", p + "_attention", **attn)
    x = m.add("add", p + "_res1", inputs=[h, x])
    return x, m.add("rms_norm", p + "_ffn_norm")


def gated_mlp(m, p, h, ffn, gate, width):
    """A gated MLP written as its layers: gate and up projections, their product, down."""
    g = m.add("dense", p + "_ffn_gate", units=ffn, activation=gate, use_bias=False)
    u = m.add("dense", p + "_ffn_up", units=ffn, use_bias=False, inputs=[h])
    h = m.add("multiply", p + "_ffn_gated", inputs=[g, u])
    return m.add("dense", p + "_ffn_down", units=width, use_bias=False)


def llama(name):
    """A Llama-family decoder: token table (no position table: rotary embeddings in attention),
    pre-norm blocks of RMSNorm, causal grouped-query attention without biases, and a gated MLP
    (gate and up projections, the gate's activation times the up projection, down projection),
    a final RMSNorm and the head."""
    layers, width, heads, kv_heads, head_dim, ffn, vocab, seq, gate, tied = LLAMA_SIZES[name]
    m = Layers()
    x = m.add("embedding", "tok_embeddings", vocab=vocab, dim=width)
    for i in range(layers):
        p = f"layers{i}"
        x, h = llama_attention(m, p, x, heads, kv_heads, head_dim, rotary=True)
        h = gated_mlp(m, p, h, ffn, gate, width)
        x = m.add("add", p + "_res2", inputs=[h, x])
    m.add("rms_norm", "norm")
    m.add("dense", "output", units=vocab, use_bias=False, tied_weights=tied, activation="softmax")
    attention = "multi-query" if kv_heads == 1 else "grouped-query" if kv_heads != heads else "multi-head"
    doc = workload(name, f"{name.replace('_', ' ').title()} ({layers} layers, width {width}, {heads} heads of {head_dim}, "
                   f"{attention} attention with {kv_heads} key/value head{'s' if kv_heads > 1 else ''}, "
                   f"{'GeGLU' if gate == 'gelu' else 'SwiGLU'} MLP of {ffn}, vocabulary {vocab}, head "
                   f"{'tied to' if tied else 'apart from'} the token table), next-token loss at sequence {seq}; FSDP, flash "
                   "attention and a checkpoint per layer, as MaxText trains it (add training.mesh.model for tensor parallelism).",
                   [seq], "int32", m.layers, 2, "adamw", 3e-4)
    # As MaxText trains them: FSDP, a flash kernel, and each decoder layer rematerialized
    # (remat_policy full; two residual adds a layer).
    doc["training"].update({"fsdp": True, "flash_attention": True, "remat": True, "remat_adds_per_segment": 2})
    return doc


# Mixture-of-experts decoders, Llama-style blocks with a moe layer for the MLP: layers, width,
# heads, key/value heads, head width, expert MLP width, experts, experts per token, shared
# experts, dense MLP width of the first layers, how many first layers are dense, vocabulary,
# sequence. Mixtral 8x7B (Jiang et al. 2024, table 1, and its released config: 46.7B
# parameters); DeepSeekMoE 16B (Dai et al. 2024, section 5 and its released config: 64
# fine-grained experts of 1408 with 2 shared, 6 routed per token, the first layer dense; 16.4B).
MOE_SIZES = {
    "mixtral_8x7b": (32, 4096, 32, 8, 128, 14336, 8, 2, 0, 0, 0, 32000, 4096),
    "deepseek_moe_16b": (28, 2048, 16, 16, 128, 1408, 64, 6, 2, 10944, 1, 102400, 4096),
}


# Mixtures of experts MaxText's published recipes train (validation points, beside the zoo):
# Mixtral 8x7B, Llama 4 Scout (llama4-17b-16e.yml: 16 experts of 8192 with one shared, 1 per
# token, no rotary embedding every fourth layer) and Qwen3-235B-A22B (qwen3-235b-a22b.yml: 128
# experts of 1536, 8 per token, heads of 128 wider than width / heads).
MAXTEXT_MOE_SIZES = {
    "mixtral_8x7b": MOE_SIZES["mixtral_8x7b"],
    "llama4_scout": (48, 5120, 40, 8, 128, 8192, 16, 1, 1, 0, 0, 202048, 8192),
    "qwen3_235b_a22b": (94, 4096, 64, 4, 128, 1536, 128, 8, 0, 0, 0, 151936, 4096),
}


def moe(name, sizes=MOE_SIZES, nope_every=0):
    """A decoder whose MLPs are mixtures of experts (the moe layer: a router, top-k dispatch,
    gated experts, the weighted combine), dropless as MaxText's megablox runs them. nope_every:
    every so many layers attend without a rotary embedding (Llama 4)."""
    (layers, width, heads, kv_heads, head_dim, expert_ffn, experts, top_k, shared, dense_ffn, dense_layers, vocab,
     seq) = sizes[name]
    m = Layers()
    x = m.add("embedding", "tok_embeddings", vocab=vocab, dim=width)
    for i in range(layers):
        p = f"layers{i}"
        x, h = llama_attention(m, p, x, heads, kv_heads, head_dim, rotary=not (nope_every and (i + 1) % nope_every == 0))
        if i < dense_layers:
            h = gated_mlp(m, p, h, dense_ffn, "silu", width)
        else:
            fields = {"experts": experts, "top_k": top_k, "units": expert_ffn, "activation": "silu"}
            if shared:
                fields["shared_experts"] = shared
            h = m.add("moe", p + "_moe", **fields)
        x = m.add("add", p + "_res2", inputs=[h, x])
    m.add("rms_norm", "norm")
    m.add("dense", "output", units=vocab, use_bias=False, activation="softmax")
    shared_text = f", {shared} shared" if shared else ""
    dense_text = f", the first {dense_layers} layer{'s' if dense_layers > 1 else ''} a dense SwiGLU MLP of {dense_ffn}" if dense_layers else ""
    doc = workload(name, f"{name.replace('_', ' ').title()} ({layers} layers, width {width}, {heads} heads of {head_dim}"
                   f"{f', {kv_heads} key/value heads' if kv_heads != heads else ''}, {experts} SwiGLU experts of {expert_ffn}"
                   f"{shared_text}, {top_k} per token, dropless{dense_text}, vocabulary {vocab}), next-token loss at sequence "
                   f"{seq}; FSDP, flash attention and a checkpoint per layer, as MaxText trains it (add training.mesh.expert "
                   "for expert parallelism).", [seq], "int32", m.layers, 2, "adamw", 3e-4)
    doc["training"].update({"fsdp": True, "flash_attention": True, "remat": True, "remat_adds_per_segment": 2})
    return doc


def maxtext_moe(name, per_device_batch, description, capacity_factor=0, nope_every=0, group_tile_rows=0):
    """A MaxText recipe's mixture of experts (tpu-recipes), its model at the recipe's batch:
    FSDP over the whole slice, flash attention, a checkpoint per decoder layer (remat full, or
    only the layer's input kept, offloaded to the host), bfloat16 compute with f32 weights; with a
    capacity factor MaxText's dense_matmul path (einsum dispatch), else megablox or ragged dot,
    whose grouped matmuls tile the sorted rows by group_tile_rows."""
    doc = moe(name, MAXTEXT_MOE_SIZES, nope_every)
    doc["name"] = name + "_maxtext"
    doc["description"] = description
    for layer in doc["model"]["layers"]:
        if layer["type"] == "moe" and capacity_factor:
            layer["capacity_factor"] = capacity_factor
            layer["dispatch"] = "einsum"
        if layer["type"] == "moe" and group_tile_rows:
            layer["group_tile_rows"] = group_tile_rows
    doc["training"]["per_replica_batch"] = per_device_batch
    doc["training"]["steps"] = 2
    return doc


# MaxText's default decoder as its published v5p and v5e performance configs trained it (MaxText
# README tables of TFLOP/s and MFU per chip; AI-Hypercomputer/maxtext@76bd53b0f, December 2023:
# MaxText/configs/base.yml, layers/models.py, pyconfig.py): width 2560, 8 heads of 256, an MLP of
# 8192 and 16 layers at global_parameter_scale 1, scaled by get_individual_scales (heads and MLP,
# then width, then layers doubling in turn); a parallel block (one RMSNorm feeds both attention and
# a ReLU MLP, their sum added to the residual stream), rotary embeddings, no biases, the head tied
# to the token table (logits_via_embedding), vocabulary 32768, sequence 2048.
def maxtext_default(scale, per_device_batch, remat_policy, note):
    log2 = scale.bit_length() - 1
    assert 1 << log2 == scale, "a power of two, as pyconfig demands"
    base, rem = divmod(log2, 3)
    heads = 8 << (base + (rem > 0))
    ffn = 8192 << (base + (rem > 0))
    width = 2560 << (base + (rem > 1))
    layers = 16 << base
    head_dim, vocab, seq = 256, 32768, 2048
    m = Layers()
    x = m.add("embedding", "token_embedder", vocab=vocab, dim=width)
    for i in range(layers):
        p = f"layers{i}"
        h = m.add("rms_norm", p + "_pre_self_attention_norm", inputs=[x])
        a = m.add("attention", p + "_self_attention", heads=heads, head_dim=head_dim, causal=True, rotary=True,
                  use_bias=False)
        f = m.add("dense", p + "_mlp_wi", units=ffn, activation="relu", use_bias=False, inputs=[h])
        f = m.add("dense", p + "_mlp_wo", units=width, use_bias=False)
        s = m.add("add", p + "_attention_plus_mlp", inputs=[a, f])
        x = m.add("add", p + "_residual", inputs=[s, x])
    m.add("rms_norm", "decoder_norm")
    m.add("dense", "logits", units=vocab, use_bias=False, tied_weights=True, activation="softmax")
    params = layers * (4 * width * heads * head_dim + 2 * width * ffn + width) + vocab * width + width
    doc = workload(f"maxtext_default_{scale}b", f"MaxText's default decoder at global_parameter_scale {scale} "
                   f"({params / 1e9:.1f}B parameters: {layers} layers, width {width}, {heads} heads of {head_dim}, a ReLU "
                   f"MLP of {ffn} beside attention in a parallel block, vocabulary {vocab}, the head tied to the token "
                   f"table), next-token loss at sequence {seq}, as MaxText's December 2023 performance configs train it "
                   f"({note}): FSDP, flash attention, remat_policy {remat_policy} per decoder layer, bfloat16 compute "
                   "with f32 weights, AdamW.", [seq], "int32", m.layers, per_device_batch, "adamw", 3e-4)
    doc["training"].update({"fsdp": True, "flash_attention": True, "remat": True, "remat_adds_per_segment": 2,
                            "remat_policy": remat_policy, "steps": 2})
    return doc


def gpt3_mlperf():
    """GPT-3 175B as MLPerf Training v4.0's cloud-tpu-v5p-1024-maxtext runs it (v5p-1024.sh):
    per_device_batch_size 4 on 512 chips (2048 sequences; 32 per 8-chip model axis), tensor 8
    (the model axis, over z of an 8x8x8 slice), FSDP over the rest, MaxText's activation
    sharding (sequence parallelism's volumes), XLA's windowed einsums (collective matmul), its
    libtpu flag --xla_jf_conv_output_fusion=false (no matmul output fusion), remat_policy full,
    flash attention, int8 (AQT); the evaluation of 24,567 sequences every 12 steps that its
    timed blocks hold."""
    doc = gpt3("175b")
    doc["name"] = "gpt3_175b_mlperf"
    doc["description"] = ("GPT-3 175B in MLPerf Training v4.0's layout on a v5p 8x8x8 (run it with --hw tpu_v5p "
                          "--topology 8x8x8): tensor 8 over z, FSDP 64, sequence parallelism, collective matmul, "
                          "no matmul output fusion, one checkpoint per layer, flash attention, int8; evaluation "
                          "every 12 steps.")
    t = doc["training"]
    # MaxText clips by the global norm of the reduced gradients (optax, gradient_clipping_threshold 1.0).
    doc["training"] = t = {**{k: t[k] for k in ("per_replica_batch", "precision", "optimizer")},
                           "gradient_clipping": "after_all_reduce", **{k: v for k, v in t.items() if k not in
                                                                       ("per_replica_batch", "precision", "optimizer")}}
    t["per_replica_batch"] = 32
    t["steps"] = 2
    t["mesh"] = {"model": "z", "sequence_parallel": True, "collective_matmul": True}
    t["remat"] = True
    t["remat_adds_per_segment"] = 2
    t["flash_attention"] = True
    t["matmul_output_fusion"] = False
    t["quantization"] = "int8"
    t["eval"] = {"examples": 24567, "every_steps": 12}
    return doc


def write(doc, folder=HERE):
    path = folder / f"{doc['name']}.json"
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


# Stable Diffusion 2's UNet (Rombach et al. 2022; the stabilityai/stable-diffusion-2-base release,
# which MLPerf Training's text-to-image benchmark trains at 512x512: latents of 64x64x4):
# channels per level, heads of 64 per level (the release's attention_head_dim lists the heads),
# ResNet blocks per level, GroupNorm groups, and the text encoder's (OpenCLIP ViT-H/14's text
# tower: width, heads, layers run, vocabulary, context).
SD2_LEVELS = (320, 640, 1280, 1280)
SD2_HEADS = (5, 10, 20, 20)
SD2_BLOCKS, SD2_GROUPS, SD2_TIME = 2, 32, 1280
SD2_TEXT = (1024, 16, 23, 49408, 77)


def sd2_resnet(m, p, x, c_in, c_out, temb, groups=SD2_GROUPS):
    """A UNet ResNet block: GroupNorm, SiLU, 3x3 convolution, the timestep's projection added
    at every position, GroupNorm, SiLU, 3x3 convolution, and the shortcut (a 1x1 convolution
    when the channels change). Its dropout rate is 0."""
    h = m.add("group_norm", p + "_norm1", groups=groups, inputs=[x])
    h = m.add("activation", p + "_silu1", activation="silu")
    h = m.add("conv2d", p + "_conv1", filters=c_out, kernel=3)
    t = m.add("dense", p + "_time_emb_proj", units=c_out, inputs=[temb])
    h = m.add("add", p + "_add_time", inputs=[h, t])
    h = m.add("group_norm", p + "_norm2", groups=groups)
    h = m.add("activation", p + "_silu2", activation="silu")
    h = m.add("conv2d", p + "_conv2", filters=c_out, kernel=3)
    if c_in != c_out:
        x = m.add("conv2d", p + "_conv_shortcut", filters=c_out, kernel=1, inputs=[x])
    return m.add("add", p + "_out", inputs=[h, x])


def sd2_heads(m, p, x, tokens, heads, perm):
    """[tokens, heads x 64] as heads of [tokens, 64] (perm [1, 0, 2]) or of [64, tokens] ([1, 2, 0])."""
    x = m.add("reshape", p + "_heads", shape=[tokens, heads, 64], inputs=[x])
    return m.add("permute", p + "_by_head", perm=perm)


def sd2_transformer(m, p, x, c, heads, side, context, groups=SD2_GROUPS):
    """A UNet transformer (linear projections in and out): GroupNorm, the positions as tokens,
    self-attention, cross-attention to the text states (written as its products: its keys and
    values come from the 77 text tokens, not the image's), a GeGLU MLP of 4c (its gate and value
    halves as two projections), each pre-LayerNorm with a residual add, and the residual around
    the whole."""
    tokens, text_tokens = side * side, SD2_TEXT[4]
    h = m.add("group_norm", p + "_norm", groups=groups, inputs=[x])
    h = m.add("reshape", p + "_tokens", shape=[tokens, c])
    h = m.add("dense", p + "_proj_in", units=c)
    a = m.add("layer_norm", p + "_norm1")
    a = m.add("attention", p + "_attn1", heads=heads, use_bias=False)
    a = m.add("add_parameter", p + "_attn1_out_bias", shape=[c])
    h = m.add("add", p + "_res1", inputs=[a, h])
    a = m.add("layer_norm", p + "_norm2")
    q = m.add("dense", p + "_attn2_q", units=c, use_bias=False)
    q = sd2_heads(m, p + "_attn2_q", q, tokens, heads, [1, 0, 2])
    k = m.add("dense", p + "_attn2_k", units=c, use_bias=False, inputs=[context])
    k = sd2_heads(m, p + "_attn2_k", k, text_tokens, heads, [1, 2, 0])
    v = m.add("dense", p + "_attn2_v", units=c, use_bias=False, inputs=[context])
    v = sd2_heads(m, p + "_attn2_v", v, text_tokens, heads, [1, 0, 2])
    s = m.add("matmul", p + "_attn2_scores", inputs=[q, k])
    s = m.add("activation", p + "_attn2_softmax", activation="softmax")
    a = m.add("matmul", p + "_attn2_context", inputs=[s, v])
    a = m.add("permute", p + "_attn2_by_token", perm=[1, 0, 2])
    a = m.add("reshape", p + "_attn2_merged", shape=[tokens, c])
    a = m.add("dense", p + "_attn2_out", units=c)
    h = m.add("add", p + "_res2", inputs=[a, h])
    f = m.add("layer_norm", p + "_norm3")
    g = m.add("dense", p + "_ff_gate", units=4 * c, activation="gelu")
    u = m.add("dense", p + "_ff_value", units=4 * c, inputs=[f])
    f = m.add("multiply", p + "_ff_geglu", inputs=[g, u])
    f = m.add("dense", p + "_ff_out", units=c)
    h = m.add("add", p + "_res3", inputs=[f, h])
    h = m.add("dense", p + "_proj_out", units=c)
    h = m.add("reshape", p + "_image", shape=[side, side, c])
    return m.add("add", p + "_out", inputs=[h, x])


def sd2_unet_layers(text_encoder=True, groups=SD2_GROUPS):
    """Stable Diffusion 2's UNet: the image latents precomputed (the VAE does not run), the
    caption encoded in each step by the frozen OpenCLIP text tower (its penultimate layer's
    output, then its final LayerNorm) or its states precomputed (an input of 77 x 1024), the
    timestep's 320 sinusoidal features through a two-layer MLP, and the UNet predicting the noise
    (mean squared error)."""
    m = Layers()
    width, text_heads, text_layers, vocab, context = SD2_TEXT
    x = m.add("conv2d", "conv_in", filters=SD2_LEVELS[0], kernel=3)  # the noised latents [64, 64, 4]
    m.add("input", "timestep_features", shape=[SD2_LEVELS[0]])
    m.add("dense", "time_embedding_1", units=SD2_TIME, activation="silu")
    m.add("dense", "time_embedding_2", units=SD2_TIME)
    temb = m.add("activation", "time_embedding_silu", activation="silu")  # each ResNet block's, computed once
    if not text_encoder:
        return sd2_unet_body(m, x, temb, m.add("input", "caption_states", shape=[context, width]), groups)
    m.add("input", "caption_tokens", shape=[context])
    c = m.add("embedding", "text_token_embedding", vocab=vocab, dim=width, positions=context, trainable=False)
    for i in range(text_layers):
        p = f"text{i}"
        h = m.add("layer_norm", p + "_ln1", trainable=False, inputs=[c])
        h = m.add("attention", p + "_attn", heads=text_heads, causal=True, trainable=False)
        c = m.add("add", p + "_res1", inputs=[h, c])
        h = m.add("layer_norm", p + "_ln2", trainable=False)
        h = m.add("dense", p + "_mlp_fc", units=4 * width, activation="gelu", trainable=False)
        h = m.add("dense", p + "_mlp_proj", units=width, trainable=False)
        c = m.add("add", p + "_res2", inputs=[h, c])
    return sd2_unet_body(m, x, temb, m.add("layer_norm", "text_ln_final", trainable=False), groups)


def sd2_unet_body(m, x, temb, context_states, groups):
    """The UNet after its input convolution: levels down, the middle, levels up, the output."""
    side = 64
    skips = [(x, SD2_LEVELS[0])]
    c_prev = SD2_LEVELS[0]
    for level, (c_out, heads) in enumerate(zip(SD2_LEVELS, SD2_HEADS)):
        attends = level < len(SD2_LEVELS) - 1
        for j in range(SD2_BLOCKS):
            p = f"down{level}_{j}"
            x = sd2_resnet(m, p + "_resnet", x, c_prev, c_out, temb, groups)
            if attends:
                x = sd2_transformer(m, p + "_attn", x, c_out, heads, side, context_states, groups)
            skips.append((x, c_out))
            c_prev = c_out
        if attends:
            x = m.add("conv2d", f"down{level}_downsample", filters=c_out, kernel=3, strides=2)
            side //= 2
            skips.append((x, c_out))
    x = sd2_resnet(m, "mid_resnet0", x, c_prev, c_prev, temb, groups)
    x = sd2_transformer(m, "mid_attn", x, c_prev, SD2_HEADS[-1], side, context_states, groups)
    x = sd2_resnet(m, "mid_resnet1", x, c_prev, c_prev, temb, groups)
    for level, (c_out, heads) in enumerate(zip(reversed(SD2_LEVELS), reversed(SD2_HEADS))):
        attends = level > 0
        for j in range(SD2_BLOCKS + 1):
            p = f"up{level}_{j}"
            skip, c_skip = skips.pop()
            x = m.add("concat", p + "_concat", inputs=[x, skip])
            x = sd2_resnet(m, p + "_resnet", x, c_prev + c_skip, c_out, temb, groups)
            if attends:
                x = sd2_transformer(m, p + "_attn", x, c_out, heads, side, context_states, groups)
            c_prev = c_out
        if level < len(SD2_LEVELS) - 1:
            m.add("upsample", f"up{level}_upsample", scale=2)
            x = m.add("conv2d", f"up{level}_upsample_conv", filters=c_out, kernel=3)
            side *= 2
    m.add("group_norm", "norm_out", groups=groups)
    m.add("activation", "silu_out", activation="silu")
    m.add("conv2d", "conv_out", filters=4, kernel=3)
    return m.layers


def sd2_unet():
    """Stable Diffusion 2's UNet as MLPerf Training's reference trains it."""
    side = 64
    doc = workload("sd2_unet", "Stable Diffusion 2's UNet (865,910,724 parameters) at 512x512 (latents of 64x64x4) as MLPerf "
                   "Training's text-to-image benchmark trains it: latents precomputed, captions of 77 tokens encoded each step "
                   "by the frozen OpenCLIP ViT-H/14 text tower (23 of its layers), noise predicted with a squared error loss.",
                   [side, side, 4], "float32", sd2_unet_layers(), 8, "adamw", 1e-4)
    doc["model"]["loss"] = "mse"
    return doc


def sd2_unet_mlperf():
    """Stable Diffusion 2's UNet as Google's MLPerf Training v4.1 TPU submissions run it
    (maxdiffusion, mlcommons/training_results_v4.1@b87b9e3:Google/benchmarks/stable_diffusion):
    the caption's states and the latents' moments precomputed (neither encoder runs), GroupNorm
    of 16 groups (run.sh's norm_num_groups), pure data parallelism, 32 images per chip, AdamW
    after a global-norm clip, no remat, a flash kernel."""
    side, context, width = 64, SD2_TEXT[4], SD2_TEXT[0]
    doc = workload("sd2_unet_mlperf", "Stable Diffusion 2's UNet as Google's MLPerf Training v4.1 TPU submissions run it "
                   "(maxdiffusion): latent moments (64x64x8) and caption states (77x1024) precomputed and fed as float32, "
                   "GroupNorm of 16 groups, data parallel, 32 images per chip, AdamW after a global-norm clip. Run it with "
                   "--hw v5p-16 (8 chips, global batch 256).",
                   [side, side, 4], "float32", sd2_unet_layers(text_encoder=False, groups=16), 32, "adamw", 1e-4)
    doc["model"]["loss"] = "mse"
    doc["input_pipeline"]["bytes_per_sample"] = (side * side * 8 + context * width) * 4
    doc["training"].update({"gradient_clipping": "after_all_reduce", "flash_attention": True})
    return doc


if __name__ == "__main__":
    write(resnet50())
    write(resnet50_mlperf())
    for size in ("base", "large"):
        for seq in (128, 512):
            write(bert(size, seq))
    write(vit_b16())
    write(gpt2("small"))
    write(gpt2("medium"))
    # Other sizes: python3 workloads/examples/make_zoo.py gpt3 6.7b
    for size in sys.argv[2:] if sys.argv[1:2] == ["gpt3"] else ("125m", "175b"):
        write(gpt3(size))
    for name in LLAMA_SIZES:
        write(llama(name))
    for name in MOE_SIZES:
        write(moe(name))
    write(sd2_unet())
    if not sys.argv[1:]:  # a submission's layout, tied to its slice: beside the zoo, not in it
        write(gpt3_mlperf(), HERE.parent / "mlperf")
        write(sd2_unet_mlperf(), HERE.parent / "mlperf")
        maxtext = HERE.parent / "maxtext"
        maxtext.mkdir(exist_ok=True)
        write(maxtext_moe("mixtral_8x7b", 8, "Mixtral 8x7B as tpu-recipes' training/trillium/Mixtral-8x7B-MaxText runs it "
                          "(mixtral_8x7b_dropped): per_device_batch_size 8 at sequence 4096, capacity factor 1.25 without "
                          "megablox (einsum dispatch), FSDP over the slice. Run it with --hw v6e-256.",
                          capacity_factor=1.25), maxtext)
        write(maxtext_moe("llama4_scout", 8, "Llama 4 Scout (text) as tpu-recipes' training/v5p/Llama4-Scout-17B-16E-Maxtext "
                          "runs it (llama4_scout_dropless_v5p_256): per_device_batch_size 8 at sequence 8192, dropless "
                          "(megablox, its grouped matmuls' rows tiled by MaxText's tile_batch_seq, 512), FSDP over the "
                          "slice. Run it with --hw v5p-256.", nope_every=4, group_tile_rows=512), maxtext)
        write(maxtext_moe("qwen3_235b_a22b", 16, "Qwen3-235B-A22B as tpu-recipes' training/ironwood recipe "
                          "qwen3-235b-a22b/4k-bf16-tpu7x-4x8x8 runs it: per_device_batch_size 16 at sequence 4096, dropless "
                          "(sparse_matmul, ragged dot; its grouped matmuls' rows tiled by 256 to 1024 in tokamax's tuned "
                          "table, 512 here), FSDP over every device. Run it with --hw tpu_v7 --topology 4x8x8.",
                          group_tile_rows=512), maxtext)
        for scale, batch, remat, note in (
                (16, 6, "full", "MaxText/configs/v5e/16b.sh: per_device_batch_size 6 over v5e-256 slices"),
                (32, 8, "minimal", "MaxText/configs/v5p/32b.sh: per_device_batch_size 8, ici_tensor_parallelism 4 "
                 "on v5p-128; v5e/32b.sh runs it at 4 with remat full and no tensor parallelism"),
                (64, 4, "minimal", "MaxText/configs/v5p/64b.sh: per_device_batch_size 4, ici_tensor_parallelism 4 "
                 "on v5p-128; v5e/64b.sh runs it at 2 with remat full and no tensor parallelism"),
                (128, 2, "minimal", "MaxText/configs/v5p/128b.sh: per_device_batch_size 2, ici_tensor_parallelism 8 "
                 "on v5p-256 and v5p-512; v5e/128b.sh runs it at 1 with remat full, FSDP 16 x tensor 16"),
                (256, 2, "minimal", "MaxText/configs/v5p/256b.sh: per_device_batch_size 2, ici_tensor_parallelism 8 "
                 "on v5p-1024"),
                (1024, 2, "full", "MaxText/configs/v5p/1024b.sh: per_device_batch_size 2, ici_tensor_parallelism 16 "
                 "on v5p-2048 and v5p-4096")):
            write(maxtext_default(scale, batch, remat, note), maxtext)
