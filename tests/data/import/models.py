"""The PyTorch models behind the ONNX fixtures, shared by make_onnx.py and make_oracle.py.

Each entry: name -> (constructor, example-input maker(batch), input dtype note).
Weights are random (weights=None); only the graph matters.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision

# Sizes of the two hand-written models.
TX_D, TX_HEADS, TX_LAYERS, TX_FF, TX_SEQ = 512, 8, 6, 2048, 128
GPT_D, GPT_HEADS, GPT_LAYERS, GPT_VOCAB, GPT_SEQ = 256, 4, 2, 1000, 64


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        hd = d // self.heads
        q = q.view(b, t, self.heads, hd).transpose(1, 2)
        k = k.view(b, t, self.heads, hd).transpose(1, 2)
        v = v.view(b, t, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.drop(self.proj(y))


class GPTBlock(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.drop(self.fc_proj(F.gelu(self.fc(self.ln2(x)))))
        return x


class TinyGPT(nn.Module):
    """GPT-2-style: token + learned position embedding, pre-LN blocks, final LN, LM head tied to
    the token embedding (GPT-2's)."""

    def __init__(self, vocab=GPT_VOCAB, d=GPT_D, heads=GPT_HEADS, layers=GPT_LAYERS, seq=GPT_SEQ):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList([GPTBlock(d, heads) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok(idx) + self.pos(pos))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


class TransformerEncoderModel(nn.Module):
    """nn.TransformerEncoder over [batch, seq, d] features (no embedding: the input is float)."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(TX_D, TX_HEADS, dim_feedforward=TX_FF, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, TX_LAYERS, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class RMSNorm(nn.Module):
    """T5's RMSNorm as Hugging Face writes it: elementwise ops, no fused norm op."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class WrittenOutLayerNorm(nn.Module):
    """A layer norm written out of means, differences and a quotient."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(d))
        self.shift = nn.Parameter(torch.zeros(d))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = (x - mu).pow(2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + self.eps) * self.gain + self.shift


class WrittenOutNorms(nn.Module):
    """A residual MLP block over [batch, 16, 64] whose norms are elementwise ops (Pow, ReduceMean,
    Sqrt, Sub, Div, Mul by a weight) and whose gate multiplies two activations."""

    def __init__(self):
        super().__init__()
        self.n1 = RMSNorm(64)
        self.fc1 = nn.Linear(64, 256)
        self.n2 = WrittenOutLayerNorm(256)
        self.fc2 = nn.Linear(256, 64)

    def forward(self, x):
        h = self.fc1(self.n1(x))
        h = torch.tanh(h) * torch.sigmoid(h)
        return x + self.fc2(self.n2(h))


def resnet50():
    return torchvision.models.resnet50(weights=None)


def vit_b_16():
    return torchvision.models.vit_b_16(weights=None)


def resnet18_finetune():
    """Fine-tuning as torch users write it: a pretrained ResNet-18 whose stem and first three
    stages are frozen (requires_grad False), its last stage and classifier trained."""
    model = torchvision.models.resnet18(weights=None)
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(("layer4.", "fc.")))
    return model


class M5(nn.Module):
    """torchaudio's speech-command tutorial's M5 (Dai et al. 2017, "Very deep convolutional
    networks for raw waveforms"): four Conv1d/BatchNorm1d/ReLU/MaxPool1d stages over one second
    of 8 kHz audio, the first conv 80 samples wide at stride 16; here closed by an adaptive
    average pool and a Linear to the 35 commands (the tutorial's avg_pool1d over the whole length
    and log_softmax are the same pool and the loss)."""

    def __init__(self, n_input=1, n_output=35, stride=16, n_channel=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(n_input, n_channel, kernel_size=80, stride=stride), nn.BatchNorm1d(n_channel), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(n_channel, n_channel, kernel_size=3), nn.BatchNorm1d(n_channel), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(n_channel, 2 * n_channel, kernel_size=3), nn.BatchNorm1d(2 * n_channel), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(2 * n_channel, 2 * n_channel, kernel_size=3, padding=1), nn.BatchNorm1d(2 * n_channel), nn.ReLU(),
            nn.MaxPool1d(4), nn.AdaptiveAvgPool1d(1), nn.Flatten())
        self.fc = nn.Linear(2 * n_channel, n_output)

    def forward(self, x):
        return self.fc(self.features(x))


# name -> (model constructor, input maker, loss target maker)
MODELS = {
    "resnet50": (resnet50,
                 lambda b: torch.randn(b, 3, 224, 224),
                 lambda b, out: torch.randint(0, 1000, (b,))),
    "resnet18_finetune": (resnet18_finetune,
                          lambda b: torch.randn(b, 3, 224, 224),
                          lambda b, out: torch.randint(0, 1000, (b,))),
    "vit_b_16": (vit_b_16,
                 lambda b: torch.randn(b, 3, 224, 224),
                 lambda b, out: torch.randint(0, 1000, (b,))),
    "transformer_encoder": (TransformerEncoderModel,
                            lambda b: torch.randn(b, TX_SEQ, TX_D),
                            # no classes: each token's d_model features are read as logits
                            lambda b, out: torch.randint(0, TX_D, (b, TX_SEQ))),
    "written_out_norms": (WrittenOutNorms,
                          lambda b: torch.randn(b, 16, 64),
                          lambda b, out: torch.randint(0, 64, (b, 16))),
    "m5_audio": (M5,
                 lambda b: torch.randn(b, 1, 8000),
                 lambda b, out: torch.randint(0, 35, (b,))),
    "gpt_tiny": (TinyGPT,
                 lambda b: torch.randint(0, GPT_VOCAB, (b, GPT_SEQ)),
                 lambda b, out: torch.randint(0, GPT_VOCAB, (b, GPT_SEQ))),
}
