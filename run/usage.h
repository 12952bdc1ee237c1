// run/usage.h: the text of `maskprior --help`, every flag with its default, and the tables'
// names and lines put in its place. run/options.h parses and checks the flags it lists.
#pragma once
#include <cstdio>
#include <string>
#include "attention/versions.cuh"  // ATTENTION_KERNELS, ATTENTION_KERNEL_COUNT: the versions' lines
#include "layers/kernels.h"        // Kernels: the default attention version
#include "prior/inits.cuh"         // INITS: the inits' lines
#include "tasks/registry.h"        // TASKS: the tasks' lines

// The help text; {tasks}, {inits} and {attention_kernels} stand for the tables' lines, and
// {attention_default} for the default version (usage_text).
static const char* USAGE = R"(usage: maskprior [flags]
Trains a small transformer whose attention carries a learnable mask log σ(M).

task and init
  --task NAME         the task                                         (maj3)
{tasks}  --target EXPR       --task boolean: the target, an expression in x0..x14
                      with numbers, + - *, ( ) and sign(): 'x0*x1*x2'
  --unseen COND       --task boolean: the held-out part, bits or products
                      of bits set to -1 or +1: 'x0=-1,x1=-1' (a subcube),
                      'x0*x1*x2=-1' (half the cube) (docs/tasks.md)
  --g-from W          the Boolean tasks' G: target, off f's Fourier support
                      (a named task's own), which reads f where it is held
                      out; or data, off the seen data's sparsest
                      interpolator (per coset the one with the most zero
                      coefficients; ties to the lower top degree, then
                      the union of their supports)                     (target)
  --init NAME         where the prior lives                            (default)
{inits}  --mask-c C          prior strength c: mask ±c; qk-* target logits c·G (6)
  --mask-per-head     one M per head instead of one per layer shared by heads
  --mask-structure F  G from a text file instead of the task's: T×T (or
                      NH×T×T, one per head) numbers 0/1
  --prior-noise P     a wrong G: flip a fraction P of its entries off the
                      diagonal (causal: below it), in pairs where G is
                      symmetric                                        (0)
  --prior-drop K      a wrong G: remove K of the edges the target needs
                      (maj3, 2parity, cyclic3: docs/method.md)         (0)
  --prior-seed S      the seed of those two draws              (the run's)
  --mask-lr-scale S   the mask's learning rate is S x --lr             (1)
  --prior-layers W    all | first: the mask or QK prior in every layer, or
                      in layer 0 only                                  (all)
  --qk-opt-steps N    Adam steps of the qk-opt fit                     (2000)
  --pe-scale S        multiply the position embedding wpe by S before the
                      init (impulse fits on it) and keep it; --init default
                      --pe-scale 18 is the control      (impulse: 18; else 1)
  --causal            causal attention (keys after the query are hidden);
                      always on for the arithmetic tasks
arithmetic data
  --data-frac F       train on this fraction of all operand pairs, drawn by
                      the seed (add3 0.004 = 4000 of 10^6; mul2 0.03)
  --train-file F      training examples from a text file instead, one per
                      line: $123+456=9750$ (answer reversed; padding optional)
  --test-file F       test examples from a file (the same format); without
                      it, --max-test held-out pairs drawn by the seed
  --max-test N        held-out test pairs when there is no test file (10000)
  --loss-on W         answer | all: the positions the next-token loss counts
                      (answer)
images (a Vision Transformer: CLS + patches)
  --data-dir DIR      the data: mnist, fashion-mnist: the four IDX files (MNIST's
                      names, .gz or raw; fashion-mnist: by default Debian's
                      /usr/share/datasets/fashion-mnist);
                      cifar10 | cifar100: the official binary version's
                      folder; images: DIR/train/<class>/*, DIR/test/<class>/*
  --patch P           patch side; must divide the image's sides         (4)
  --pool W            cls | mean: the readout reads CLS or the patches' mean (cls)
  --mask-window K     G: a patch sees the K x K patches around it (odd)   (3)
  --crop-pad N        random crop with N pixels of padding; 0: none
                              (mnist: 0; fashion-mnist: 2; else 4)
  --flip, --no-flip   the random horizontal flip on or off  (mnist: off; else on)
  --randaugment M     RandAugment before the normalisation, timm's
                      rand-mM-mstd0.5-inc1 (recipe/randaugment.h): magnitude
                      M of 0..10 (the recipe's: 9); 0: off              (0)
  --randaugment-ops N the ops RandAugment draws for each image          (2)
  --random-erase P    erase one random rectangle of the normalised image
                      with noise, with probability P (timm's mode 'pixel';
                      the recipe's: 0.25); 0: off                       (0)
  --resize N          images: resize every image to N x N (else all must
                      have the first image's size)
  --coarse-labels     cifar100: the 20 coarse classes, not the 100 fine
  --mixup A           mix each training batch with itself flipped: row b's
                      image and target become λ (row b) + (1-λ) (row B-1-b),
                      λ ~ Beta(A, A) per batch (timm's recipe: 0.8); 0: off (0)
  --cutmix A          instead paste a box of about (1-λ) of the image from row
                      B-1-b into row b (timm's recipe: 1.0); 0: off      (0)
  --mix-switch P      with both on: the chance that a batch takes cutmix (0.5)
  --mix-prob P        the chance that a batch is mixed at all            (1)
language (a causal LM: every position predicts the next token)
  --data-dir DIR      lm: the folder data/prepare_text.py wrote (train.bin,
                      val.bin, tokenizer.bin)
  --seq-len T         tokens per window                                (128)
  --mask-window W     G: query i sees keys i-W+1 .. i    (lm: 16; images: 3)
  --mask-prior P      window (M = ±c from G) | alibi (one M per head, log σ(M)
                      = -m_h (i - j), ALiBi's slopes; implies --mask-per-head)
                                                                   (window)
  --freeze-mask       the mask keeps its initial value: a fixed bias, not learned
  --eval-windows N    the most validation windows evaluated            (1024)
sampling (prints text from a language model's checkpoint, then exits)
  --generate FILE     the checkpoint (its folder's run or --data-dir gives
                      the tokenizer)
  --prompt TEXT       the text to continue                             ("")
  --sample-tokens N   tokens to generate                               (200)
  --temperature X     softmax temperature; 0: greedy                   (1)
  --top-k K           sample among the K likeliest tokens; 0: all      (0)
model
  --width C           residual width                                   (32)
  --layers L          transformer blocks                               (2)
  --heads NH          attention heads                                  (2)
  --head-size HS      size of one head, independent of the width       (16)
  --mlp H             MLP hidden size                                  (32)
  --encoding E        token (a learned row per token) | scalar (a token with a
                      value, a bit ±1, is value x one learned vector)  (token)
training
  --steps N           optimizer steps                                  (1500)
  --epochs E          instead of --steps: E passes over the training set
  --batch B           examples per step                                (64)
  --optimizer NAME    adamw (decoupled weight decay) | adam (weight decay
                      as L2 in the gradient, torch.optim.Adam, GOTU's)  (adamw)
  --loss L            regression loss: mse | logistic (log(1 + exp(-y ŷ))
                      on ±1 targets)                                   (mse)
  --lr LR             learning rate                                    (1e-3)
  --wd WD             weight decay: images, lm: the weight matrices alone
                      (timm, nanoGPT); else all weights but the mask
                                        (images: 0.05; lm: 0.1; else 1e-3)
  --mask-wd WD        weight decay of the mask                         (0)
  --schedule S        constant | cosine (linear warmup, then cosine decay
                      to --min-lr · lr)     (images, lm: cosine; else constant)
  --warmup N          warmup steps            (images, lm: steps/20; else 0)
  --min-lr F          the cosine's end as a fraction of --lr           (0)
  --clip-grad X       clip the global gradient norm to X; 0: no clipping
                                                    (images, lm: 1; else 0)
  --label-smoothing E cross-entropy with smoothed targets (images: 0.1; else 0)
  --drop-path R       stochastic depth: in training, each block's two residual
                      branches dropped per example at rate R·l/(L-1) in block l,
                      kept ones scaled by 1/(1-rate), as timm's ViT; any task (0)
  --ema D             also evaluate the weights' moving average, D·ema + (1-D)·
                      params after every step (timm: 0.9999): ema_* metrics (0)
  --seed S            fixes init, data order and so the whole run      (1)
  --device D          auto | cpu | cuda (auto: the GPU if there is one) (auto)
  --cpu-kernel N      the CPU's matmul, attention and LayerNorm: 1 the lesson's
                      plain loops (attention.cuh, layers/), 2 their fast twins
                      (cpu_fast/); the same bits either way             (2)
  --tf32              allow TF32 matmuls on the GPU (off: plain fp32)
  --attention-kernel N  the GPU's attention kernels (docs/kernels.md); every
                      version computes the same attention, to rounding ({attention_default})
{attention_kernels}  --matmul-kernel N   the GPU's matmuls: 1 cuBLAS, then the bias and GELU
                      kernels; 2 cuBLASLt with them fused in (docs/kernels.md) (1)
  --fast-kernels      on the GPU, the other layers' second kernel versions:
                      a warp per LayerNorm and cross-entropy row, residual
                      + LayerNorm and bias + GELU fused, the bias and
                      LayerNorm gradients summed in row groups          (off)
  --cuda-graph        on the GPU, capture the training step once as a CUDA
                      graph and replay it each step (docs/kernels.md)   (off)
reports and files
  --eval-every N      evaluate every N steps (and at the end)          (500)
  --log-every N       progress line every N steps                      (steps/10)
  --out DIR           run folder: log.jsonl, metrics.json, model.safetensors
                      (runs/<task>-<init>-s<seed>)
  --save FILE         checkpoint path (DIR/model.safetensors)
  --resume FILE       continue a run from its checkpoint, bit-exactly
  --checkpoint-every N
                      save the checkpoint every N steps (atomically, over the
                      last one); 0: only at the end   (every 5 minutes of work)
  --continue          continue the run folder's own checkpoint if it has one
                      (bit-exactly), else start afresh: a killed run, started
                      again with the same flags and --continue, loses at most
                      one checkpoint interval; one stopped by SIGTERM, SIGINT
                      or SIGUSR1 (checkpoint written, exit 3) loses nothing
  --dump-state FILE   write parameters, the first batch, its loss and every gradient, then exit
  --profile N         after one warm-up step, N GPU training steps with every launch, cuBLAS
                      call, copy and synchronisation recorded: one table by kernel (times on a
                      GPU; threads, walks and H200 lower bounds everywhere), then exit
  --list WHAT         print the names of: tasks | inits | variants (the inits
                      with their mask variants, as run folders and tables name
                      them) | attention-kernels, one a line; then exit
  --version           the commit and the build settings of this binary
  --help              this text
)";

// One line of a table in the help: "      name           what it is"
inline std::string usage_line(const std::string& name, const char* help) {
    char line[160];
    snprintf(line, sizeof line, "      %-14s %s\n", name.c_str(), help);
    return line;
}

// USAGE with the tables' lines in place
inline std::string usage_text() {
    std::string tasks, inits, kernels;
    for (const TaskKind& kind : TASKS) tasks += usage_line(kind.name, kind.help);
    for (const InitKind& kind : INITS) inits += usage_line(kind.name, kind.help);
    for (int v = 1; v <= ATTENTION_KERNEL_COUNT; v++)
        kernels += usage_line(std::to_string(v), ATTENTION_KERNELS[v - 1].idea);
    std::string text = USAGE;
    auto put = [&text](const std::string& placeholder, const std::string& value) {
        text.replace(text.find(placeholder), placeholder.size(), value);
    };
    put("{tasks}", tasks);
    put("{inits}", inits);
    put("{attention_kernels}", kernels);
    put("{attention_default}", std::to_string(Kernels().attention));
    return text;
}
