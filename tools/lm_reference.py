#!/usr/bin/python3
"""The PyTorch reference of maskprior's causal language model (--task lm; tasks/language.h).

    tools/lm_reference.py train --data-dir DIR [--steps 2000] [--seed 1] [--threads 1] [--warmup W]
            [--init-from STATE] [--width 64 --layers 2 --heads 4 --head-size 16 --mlp 256
             --seq-len 64 --batch 32 --lr 1e-3 --eval-windows 512 --eval-every 500]
        trains the same model with the same recipe as ./maskprior --task lm --init default, in
        PyTorch float32, on the very training windows maskprior draws for that seed, and prints
        the validation loss (nats per token), perplexity and bits per byte at step 0, every
        --eval-every steps and at the end, then one line of JSON with the final numbers.
        The recipe: GPT-2's init (prior/init.cuh, WEIGHTS_GPT2: embeddings and Linear weights
        N(0, 0.02²), the residual projections attn.proj and mlp.proj N(0, (0.02/sqrt(2L))²),
        biases 0, LayerNorm 1 and 0; no mask); AdamW (betas 0.9, 0.999, eps 1e-8, decoupled
        weight decay 0.1 on every parameter, embeddings, biases and LayerNorm included, as
        layers/adamw.cuh does); the learning rate of run/schedule.h, a linear warmup over W steps
        (default steps/20, the language recipe of experiments/lm_table.sh) then a cosine to 0;
        the gradient's global norm clipped at 1. To compare with one maskprior run, give --warmup
        the number of warmup steps that run took (run/setup.cuh: warmup_steps). Its own
        random numbers for the init (torch.manual_seed), so the weights match maskprior's in
        distribution, not bit for bit; the data order is maskprior's exactly. --init-from STATE
        starts instead from the parameters of a file that ./maskprior --dump-state wrote at step 0
        for the same seed and model (its init, to the bit), so that the two runs differ only by
        the rounding of their arithmetic.
    tools/lm_reference.py evaluate CHECKPOINT [--data-dir DIR] [--eval-windows N]
        loads a checkpoint that ./maskprior --task lm wrote (any init: a mask enters the scores as
        log σ(M)) and prints the validation metrics PyTorch computes on maskprior's evaluation
        windows. DIR defaults to the checkpoint's data_dir, N to the eval_examples of the
        metrics.json next to the checkpoint (else 1024, maskprior's default); when that
        metrics.json exists, its val_loss and bits_per_byte are printed beside, with the
        differences: of the order of 1e-8 when the two implementations agree (float32 logits,
        the per-token losses summed in double on both sides).
    tools/lm_reference.py check-batch STATE [--data-dir DIR]
        STATE is a file of ./maskprior --task lm --dump-state (with --resume of a checkpoint at
        step k, it holds the batch of step k): recomputes that step's windows here and says
        whether every input and target token matches. Exit code 0 when all do, 1 otherwise.

The data (tasks/language.h, tasks/token_file.h):
  - A token file is a 32-byte header ("MPTOKENS", version, V, count, text bytes) and uint16 ids;
    tokenizer.bin lists per id its score, type, and the UTF-8 bytes it decodes to.
  - Training: the training tokens are cut into chunks of T; example k of the run (step s, row r
    is k = s·B + r) is chunk EpochOrder(seed).example(k), and its window starts at
    chunk·T + example_draw(seed, s, r) mod T: T inputs, and the T tokens one further as targets.
  - Evaluation: of the windows = (val tokens - 1) // T non-overlapping windows at multiples of
    T, n = min(windows, --eval-windows) spread evenly over the file: window k starts at
    (k·windows // n)·T, k = 0 .. n-1.
  - Metrics: val_loss = Σ NLL / tokens, perplexity = e^val_loss, bits per byte =
    Σ NLL / (ln 2 · the bytes the predicted tokens decode to).

The model is tests/torch_reference.py's (model_output, model_loss), run in float32: pre-LN
blocks, qkv rows all heads' q then k then v, causal attention with log σ(M) added to the
scores when there is a mask, GELU tanh, final LayerNorm and a head on every position.
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torch_reference as ref  # noqa: E402
from bigram import FormatError, read_token_lengths, read_tokens  # noqa: E402  (tools/, beside this file)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------
# maskprior's random streams (tasks/task.h), in Python integers masked to 64 bits

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment, 2^64 / the golden ratio
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # its two multipliers


def splitmix64(x):
    """One step of splitmix64 from state x (a 64-bit word): tasks/task.h's splitmix64."""
    x = (x + GOLDEN) & MASK64
    x = ((x ^ (x >> 30)) * MIX1) & MASK64
    x = ((x ^ (x >> 27)) * MIX2) & MASK64
    return x ^ (x >> 31)


def example_draw(seed, step, row):
    """The draw of row `row` of the batch of step `step` (0-based) under the run's seed."""
    return splitmix64(splitmix64(splitmix64(seed) ^ (step & MASK64)) ^ (row & MASK64))


class EpochOrder:
    """The order of the n training examples, as tasks/task.h's EpochOrder: epoch e is a
    Fisher-Yates shuffle of 0..n-1 driven by a splitmix64 stream seeded by (seed, e)."""

    def __init__(self, seed, n):
        self.seed, self.n = seed & MASK64, n
        self.epoch, self.perm = -1, []

    def example(self, k):
        """The index of example k of the whole run (k = step·B + row)."""
        e = k // self.n
        if e != self.epoch:
            self.epoch = e
            self.perm = list(range(self.n))
            s = ((self.seed * GOLDEN) & MASK64) ^ (((e + 1) * MIX1) & MASK64)
            for i in range(self.n - 1, 0, -1):  # the stream's next word picks j in 0..i
                s = (s + GOLDEN) & MASK64
                z = ((s ^ (s >> 30)) * MIX1) & MASK64
                z = ((z ^ (z >> 27)) * MIX2) & MASK64
                z ^= z >> 31
                j = z % (i + 1)
                self.perm[i], self.perm[j] = self.perm[j], self.perm[i]
        return self.perm[k % self.n]


# ----------------------------------------------------------------------------
# the token folder (tasks/token_file.h; read and checked by tools/bigram.py's readers)

class TokenFolder:
    """A folder that data/prepare_text.py wrote, cut as LanguageTask cuts it for windows of T."""

    def __init__(self, folder, T, eval_windows):
        vocab, self.train = read_tokens(os.path.join(folder, "train.bin"))
        _, self.val = read_tokens(os.path.join(folder, "val.bin"))
        self.bytes = read_token_lengths(os.path.join(folder, "tokenizer.bin"))
        self.vocab, self.T = vocab, T
        self.chunks = (len(self.train) - 1) // T - 1  # chunk c's window starts at c·T + phase, phase < T
        windows = (len(self.val) - 1) // T
        n = min(windows, eval_windows)
        self.eval_start = [(k * windows // n) * T for k in range(n)]

    def train_batch(self, order, seed, step, B):
        """(inputs, targets), each (B,T) int64: the training windows of step `step`."""
        starts = [order.example(step * B + r) * self.T + example_draw(seed, step, r) % self.T for r in range(B)]
        return self.windows(self.train, starts)

    def windows(self, tokens, starts):
        """(inputs, targets) of the windows [start, start + T] of a token array."""
        rows = np.stack([np.asarray(tokens[s:s + self.T + 1], dtype=np.int64) for s in starts])
        rows = torch.from_numpy(rows)
        return rows[:, :-1], rows[:, 1:]


# ----------------------------------------------------------------------------
# the model, its init and its evaluation

def model_config(width, layers, heads, head_size, mlp, seq_len, vocab, mask="none", mask_layers="all"):
    """tests/torch_reference.py's configuration of a causal LM (a checkpoint's metadata keys)."""
    return {"width": width, "layers": layers, "heads": heads, "head_size": head_size, "mlp": mlp,
            "seq_len": seq_len, "vocab": vocab, "out": vocab, "causal": 1, "mask": mask,
            "mask_layers": mask_layers, "head_type": "next_token"}


def init_gpt2(cfg):
    """Parameters drawn as prior/init.cuh's init_default(WEIGHTS_GPT2) draws them, float32."""
    residual_sd = 0.02 / math.sqrt(2 * cfg["layers"])
    p = {}
    for name, shape in ref.parameter_shapes(cfg).items():
        if any(part.startswith("ln") for part in name.split(".")):  # ln1, ln2, ln_f: weight 1, bias 0
            p[name] = torch.full(shape, float(name.endswith(".weight")))
        elif name.endswith(".bias"):
            p[name] = torch.zeros(shape)
        elif name.endswith(("attn.proj.weight", "mlp.proj.weight")):  # the residual projections
            p[name] = torch.randn(shape) * residual_sd
        else:  # wte, wpe, qkv, mlp.fc and the head
            p[name] = torch.randn(shape) * 0.02
    return p


def read_parameters(path, cfg, seed):
    """The parameters of model cfg from a safetensors file of maskprior's, as float32; a note when
    the file is not the init of a run with this seed."""
    tensors, meta = ref.read_safetensors(path)
    p = {}
    for name, shape in ref.parameter_shapes(cfg).items():
        if name not in tensors or tuple(tensors[name].shape) != tuple(shape):
            sys.exit(f"lm_reference.py: error: {path} has no parameter {name} of shape {tuple(shape)}")
        p[name] = tensors[name].float()
    if meta.get("step", "0") != "0":
        print(f"lm_reference.py: note: {path} holds the parameters of step {meta['step']}, not an init")
    if meta.get("seed", str(seed)) != str(seed):
        print(f"lm_reference.py: note: {path} is the init of seed {meta['seed']}; the data order is seed {seed}'s")
    return p


def evaluate(p, cfg, data, batch=32):
    """{val_loss, perplexity, bits_per_byte, eval_tokens} on data's evaluation windows."""
    nll, tokens, text_bytes = 0.0, 0, 0
    with torch.no_grad():
        for first in range(0, len(data.eval_start), batch):
            starts = data.eval_start[first:first + batch]
            inputs, targets = data.windows(data.val, starts)
            logits = ref.model_output(p, cfg, inputs)  # (rows,T,V)
            losses = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
            nll += losses.double().sum().item()  # summed in double, as LanguageScorer does
            tokens += targets.numel()
            text_bytes += int(data.bytes[targets.numpy()].sum())
    loss = nll / tokens
    return {"val_loss": loss, "perplexity": math.exp(loss), "bits_per_byte": nll / (math.log(2) * text_bytes),
            "eval_tokens": tokens}


def describe(metrics):
    return "val_loss {val_loss:.4f} perplexity {perplexity:.4f} bits_per_byte {bits_per_byte:.4f}".format(**metrics)


# ----------------------------------------------------------------------------
# the learning rate (run/schedule.h)

def learning_rate(step, total_steps, base_lr, warmup_steps, min_lr_fraction=0.0):
    """The rate of 0-based step `step`: linear warmup to base_lr over warmup_steps, then a cosine
    to min_lr_fraction · base_lr at total_steps. As in the C++, the rates given are float32
    (--lr is parsed into a float), the arithmetic is double, the result is rounded to float32."""
    base_lr, min_lr_fraction = float(np.float32(base_lr)), float(np.float32(min_lr_fraction))
    if step < warmup_steps:
        return float(np.float32(base_lr * (step + 1) / warmup_steps))
    min_lr = base_lr * min_lr_fraction
    if step >= total_steps:
        return float(np.float32(min_lr))
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # [0, 1)
    return float(np.float32(min_lr + (base_lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress))))


# ----------------------------------------------------------------------------
# the three commands

def train(args):
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    data = TokenFolder(args.data_dir, args.seq_len, args.eval_windows)
    cfg = model_config(args.width, args.layers, args.heads, args.head_size, args.mlp, args.seq_len, data.vocab)
    p = init_gpt2(cfg) if not args.init_from else read_parameters(args.init_from, cfg, args.seed)
    params = [t.requires_grad_() for t in p.values()]
    # the rate is set before every step; decoupled decay on every parameter (layers/adamw.cuh)
    optimizer = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    warmup = args.warmup if args.warmup >= 0 else args.steps // 20
    order = EpochOrder(args.seed, data.chunks)
    print(f"lm_reference.py: PyTorch {torch.__version__} float32, {args.threads} thread(s); {args.data_dir}: "
          f"V {data.vocab}, {data.chunks} training chunks of T {args.seq_len}, {len(data.eval_start)} eval windows; "
          f"C {args.width} L {args.layers} NH {args.heads} HS {args.head_size} MLP {args.mlp} B {args.batch}, "
          f"{sum(t.numel() for t in params)} parameters; {args.steps} steps, lr {args.lr:g}, warmup {warmup}, "
          f"seed {args.seed}, init {args.init_from or 'GPT-2 (own draw)'}", flush=True)
    start, losses = time.time(), []
    metrics = evaluate(p, cfg, data)
    print(f"eval step {0:6d} | {describe(metrics)}", flush=True)
    for step in range(args.steps):
        inputs, targets = data.train_batch(order, args.seed, step, args.batch)
        loss = ref.model_loss(p, cfg, inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(step, args.steps, args.lr, warmup)
        optimizer.step()
        losses.append(loss.item())
        done = step + 1
        if done % args.eval_every == 0 or done == args.steps:
            metrics = evaluate(p, cfg, data)
            print(f"eval step {done:6d} | train loss {sum(losses) / len(losses):.4f} (mean since the last eval) | "
                  f"{describe(metrics)} | {time.time() - start:.0f} s", flush=True)
            losses = []
    seconds = time.time() - start
    print(json.dumps(dict(metrics, steps=args.steps, seed=args.seed, warmup=warmup, seconds=round(seconds, 1),
                          threads=args.threads, implementation="pytorch-float32")))


def find_data_dir(given, checkpoint):
    """The token folder: as given, else relative to the repository root or the checkpoint's folder."""
    for candidate in (given, os.path.join(ROOT, given), os.path.join(os.path.dirname(checkpoint), given)):
        if os.path.exists(os.path.join(candidate, "train.bin")):
            return candidate
    sys.exit(f"lm_reference.py: error: no token folder {given} (pass --data-dir)")


def evaluate_checkpoint(args):
    tensors, meta = ref.read_safetensors(args.checkpoint)
    if meta.get("task") != "lm":
        sys.exit(f"lm_reference.py: error: {args.checkpoint} is a checkpoint of {meta.get('task')}, not lm")
    run_metrics_path = os.path.join(os.path.dirname(os.path.abspath(args.checkpoint)), "metrics.json")
    run_metrics = json.load(open(run_metrics_path)) if os.path.exists(run_metrics_path) else None
    eval_windows = args.eval_windows or (run_metrics or {}).get("eval_examples") or 1024
    data = TokenFolder(find_data_dir(args.data_dir or meta["data_dir"], args.checkpoint), int(meta["seq_len"]),
                       int(eval_windows))
    numbers = [int(meta[k]) for k in ("width", "layers", "heads", "head_size", "mlp", "seq_len", "vocab")]
    cfg = model_config(*numbers, mask=meta["mask"], mask_layers=meta.get("mask_layers", "all"))
    p = {name: tensors[name].float() for name in ref.parameter_shapes(cfg)}  # not the optimizer's opt.*
    torch.set_num_threads(args.threads)
    metrics = evaluate(p, cfg, data)
    print(f"PyTorch float32 on {args.checkpoint} (step {meta.get('step', '?')}, mask {meta['mask']}, "
          f"{len(data.eval_start)} windows of {data.T}): {describe(metrics)}")
    if run_metrics is not None:
        ours = {k: run_metrics[k] for k in ("val_loss", "bits_per_byte")}
        print(f"maskprior's {run_metrics_path}: val_loss {ours['val_loss']:.6f} bits_per_byte "
              f"{ours['bits_per_byte']:.6f}; PyTorch minus maskprior: val_loss "
              f"{metrics['val_loss'] - ours['val_loss']:+.2e}, bits_per_byte "
              f"{metrics['bits_per_byte'] - ours['bits_per_byte']:+.2e}")
    print(json.dumps(metrics))


def check_batch(args):
    tensors, meta = ref.read_safetensors(args.checkpoint)
    if meta.get("task") != "lm":
        sys.exit(f"lm_reference.py: error: {args.checkpoint} is a dump of {meta.get('task')}, not lm")
    seed, step = int(meta["seed"]), int(meta["step"])
    dumped_inputs, dumped_targets = tensors["batch.inputs"].long(), tensors["batch.targets"].long()
    B, T = dumped_inputs.shape
    data = TokenFolder(find_data_dir(args.data_dir or meta["data_dir"], args.checkpoint), T, 1)
    inputs, targets = data.train_batch(EpochOrder(seed, data.chunks), seed, step, B)
    wrong = ((inputs != dumped_inputs) | (targets != dumped_targets)).any(dim=1)
    print(f"{args.checkpoint}: seed {seed} step {step}, {B} windows of {T}: "
          f"{B - int(wrong.sum())} match maskprior's, {int(wrong.sum())} do not")
    return 1 if wrong.any() else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["train", "evaluate", "check-batch"])
    parser.add_argument("checkpoint", nargs="?", help="evaluate: a checkpoint; check-batch: a --dump-state file")
    parser.add_argument("--data-dir", help="the token folder (evaluate, check-batch: the file's data_dir)")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=-1, help="warmup steps (-1: steps/20)")
    parser.add_argument("--init-from", help="train: the initial parameters from a --dump-state file of step 0")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-size", type=int, default=16)
    parser.add_argument("--mlp", type=int, default=256)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--eval-windows", type=int, help="the most evaluation windows (train: 512)")
    parser.add_argument("--eval-every", type=int, default=500)
    args = parser.parse_args()
    if args.mode == "train":
        if not args.data_dir:
            parser.error("train needs --data-dir")
        args.eval_windows = args.eval_windows or 512
        train(args)
    elif not args.checkpoint:
        parser.error(f"{args.mode} needs a file")
    elif args.mode == "evaluate":
        evaluate_checkpoint(args)
    else:
        sys.exit(check_batch(args))


if __name__ == "__main__":
    try:
        main()
    except FormatError as e:  # a malformed token folder: one line, exit code 2
        print(f"lm_reference.py: error: {e}", file=sys.stderr)
        sys.exit(2)
