#!/bin/sh
# tests/fuzz/make_corpus.sh: writes the fuzzers' valid seeds, tests/fuzz/corpus/<parser>/valid/,
# from real files. The seeds are committed, so `make fuzz` needs none of this; the script
# documents how each seed was made and remakes them: the same bytes each time, but for the
# checkpoints' metadata (the run's time, folder and commit) and whatever a new version of
# sentencepiece or PIL changes.
#
#   sh tests/fuzz/make_corpus.sh        (from the repository root)
#
# Needs: ./maskprior (built), /usr/bin/python3 with numpy, PIL and sentencepiece, the Debian
# package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) and CIFAR-10 as a folder of
# JPEG files, train/<class>/NNNN.jpg and test/<class>/NNNN.jpg ($CIFAR10_JPEG, default
# data/cifar10-jpeg; the README in data/ says where such a copy comes from).
#
#   safetensors  two checkpoints of 2 training steps of a tiny maj3 model (default init; mask init);
#                and into rejected/, five small files the official reader refuses and ours once read
#                (a gap, overlapping tensors, an end before its begin, a name twice, a header not UTF-8)
#   structure    the --mask-structure files of experiments/structures/
#   arithmetic   a few lines of add3 and of mul2, in every spelling the reader accepts
#   idx          the first 4 Fashion-MNIST training images and labels, the first 3 test ones;
#                raw and gzip
#   cifar        2-record CIFAR-10 and CIFAR-100 binary files of CIFAR-10 test images, and the
#                three class-name files (10 CIFAR-10 names; 20 coarse, 100 fine CIFAR-100 names)
#   image        CIFAR-10 JPEGs as they are, and re-saved as progressive JPEG, PNG (RGB, palette,
#                16-bit grey) and BMP (bottom-up and top-down); Fashion-MNIST images as grey and grey+alpha PNG, grey JPEG
#   token_file   train.bin and val.bin of data/prepare_text.py on tests/fixtures/text/tiny.txt,
#                bytes and BPE (400 pieces) tokenizers
#   vocabulary   the tokenizer.bin of those two runs
#   target       --task boolean's --target and --unseen, a line each: maj3's, 2parity's and threesym's
#                (a parity hold-out), and three that use every piece of the grammar (numbers, unary
#                signs, sign(), spaces, +1, products of bits mixed with single bits)
set -e
cd "$(dirname "$0")/../.." || exit 1
python=/usr/bin/python3
corpus=tests/fuzz/corpus
cifar=${CIFAR10_JPEG:-data/cifar10-jpeg}
fashion=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for parser in safetensors structure arithmetic idx cifar image token_file vocabulary target; do
    rm -rf "$corpus/$parser/valid"
    mkdir -p "$corpus/$parser/valid"
done

# safetensors: real checkpoints, as small as the model gets
for init in default mask; do
    ./maskprior --task maj3 --init "$init" --steps 2 --width 8 --heads 1 --head-size 4 --mlp 8 --layers 1 \
        --device cpu --out "$tmp/run-$init" --save "$corpus/safetensors/valid/maj3-$init.safetensors" >/dev/null
done

# safetensors/rejected: headers written by hand, each broken in one way (run/safetensors.h says why)
"$python" - "$corpus/safetensors/rejected" <<'EOF'
import struct, sys
def tensor(name, begin, end):
    return '"%s":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}' % (name, (end - begin) // 4, begin, end)
def write(name, header, data_bytes):
    header = header.encode("latin-1")  # one byte a character, as written
    header += b" " * (-len(header) % 8)
    data = struct.pack("<%df" % (data_bytes // 4), *range(data_bytes // 4))
    with open("%s/%s.safetensors" % (sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)
write("gap-between-tensors", "{%s,%s}" % (tensor("a", 0, 4), tensor("b", 8, 12)), 12)
write("tensors-overlap", "{%s,%s}" % (tensor("a", 0, 8), tensor("b", 4, 12)), 12)
write("offsets-end-before-begin", '{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]},%s}' % tensor("b", 0, 4), 4)
write("name-twice", "{%s,%s}" % (tensor("a", 0, 4), tensor("a", 4, 8)), 8)
write("header-not-utf8", '{"__metadata__":{"k":"\xe9"},%s}' % tensor("a", 0, 4), 4)  # Latin-1's é, byte 0xE9
EOF

cp experiments/structures/*.txt "$corpus/structure/valid/"

# arithmetic: padded and unpadded, with and without '$', short answers, CRLF, blank lines
printf '$123+456=9750$\n012+034=6400\n7+8=51\n\n  999+999=8991  \n$5+0=5$\r\n0+0=0\n' \
    >"$corpus/arithmetic/valid/add3-mixed.txt"
printf '$12*34=8040$\n07*08=6500\n9*9=18\n\n  99*99=1089  \r\n$0*5=0$\n' >"$corpus/arithmetic/valid/mul2-mixed.txt"

# idx, cifar, image: cut from the real data sets
"$python" - "$fashion" "$cifar" "$corpus" <<'EOF'
import gzip, io, os, struct, sys
import numpy as np
from PIL import Image
fashion, cifar, corpus = sys.argv[1:4]

def idx_records(name, header_bytes, record_bytes, count):
    """The header and the first `count` records of an official IDX file, with the count set to `count`."""
    data = gzip.open(os.path.join(fashion, name + ".gz")).read()
    header = bytearray(data[:header_bytes])
    header[4:8] = struct.pack(">I", count)
    return bytes(header) + data[header_bytes:header_bytes + count * record_bytes]

def write(path, data):
    with open(path, "wb") as f:
        f.write(data)

idx = os.path.join(corpus, "idx", "valid")
for split, count in (("train", 4), ("t10k", 3)):
    images = idx_records(split + "-images-idx3-ubyte", 16, 28 * 28, count)
    labels = idx_records(split + "-labels-idx1-ubyte", 8, 1, count)
    for kind, data in (("images-idx3", images), ("labels-idx1", labels)):
        base = os.path.join(idx, "%s-%s-%d" % (split, kind, count))
        write(base, data)
        write(base + ".gz", gzip.compress(data, mtime=0))

names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
def cifar_jpeg(cls, number):
    return os.path.join(cifar, "test", cls, "%04d.jpg" % number)
def planes(path):
    """channel-first RGB bytes of a 32x32 image, as a CIFAR record holds them"""
    return np.asarray(Image.open(path).convert("RGB")).transpose(2, 0, 1).tobytes()

cifar_dir = os.path.join(corpus, "cifar", "valid")
write(os.path.join(cifar_dir, "cifar10-2records.bin"),
      b"".join(bytes([names.index(c)]) + planes(cifar_jpeg(c, 0)) for c in ("cat", "ship")))
# CIFAR-100 records: two trucks, labelled as CIFAR-100's pickup_truck (coarse 18 vehicles_1, fine 58)
write(os.path.join(cifar_dir, "cifar100-2records.bin"),
      b"".join(bytes([18, 58]) + planes(cifar_jpeg("truck", n)) for n in (0, 1)))
write(os.path.join(cifar_dir, "batches.meta.txt"), ("\n".join(names) + "\n\n").encode())
coarse = ("aquatic_mammals fish flowers food_containers fruit_and_vegetables household_electrical_devices "
          "household_furniture insects large_carnivores large_man-made_outdoor_things "
          "large_natural_outdoor_scenes large_omnivores_and_herbivores medium_mammals "
          "non-insect_invertebrates people reptiles small_mammals trees vehicles_1 vehicles_2").split()
fine = ("apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus butterfly "
        "camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab crocodile cup "
        "dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard lamp lawn_mower "
        "leopard lion lizard lobster man maple_tree motorcycle mountain mouse mushroom oak_tree orange orchid "
        "otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine possum rabbit raccoon ray road "
        "rocket rose sea seal shark shrew skunk skyscraper snail snake spider squirrel streetcar sunflower "
        "sweet_pepper table tank telephone television tiger tractor train trout tulip turtle wardrobe whale "
        "willow_tree wolf woman worm").split()
assert len(coarse) == 20 and len(fine) == 100 and fine[58] == "pickup_truck"
write(os.path.join(cifar_dir, "coarse_label_names.txt"), ("\n".join(coarse) + "\n").encode())
write(os.path.join(cifar_dir, "fine_label_names.txt"), ("\n".join(fine) + "\n").encode())

image_dir = os.path.join(corpus, "image", "valid")
def save(image, name, **options):
    out = io.BytesIO()
    image.save(out, **options)
    write(os.path.join(image_dir, name), out.getvalue())
write(os.path.join(image_dir, "cifar-bird.jpg"), open(cifar_jpeg("bird", 0), "rb").read())
write(os.path.join(image_dir, "cifar-frog.jpg"), open(cifar_jpeg("frog", 0), "rb").read())
rgb = Image.open(cifar_jpeg("horse", 0)).convert("RGB")
save(rgb, "cifar-horse-progressive.jpg", format="JPEG", quality=75, progressive=True)
save(rgb, "cifar-horse.png", format="PNG")
save(rgb.quantize(16), "cifar-horse-palette.png", format="PNG")
save(rgb, "cifar-horse.bmp", format="BMP")
# the same BMP stored top-down (a negative height, rows first to last), which PIL does not write
bmp = bytearray(open(os.path.join(image_dir, "cifar-horse.bmp"), "rb").read())
offset, (width, height), stride = struct.unpack("<I", bmp[10:14])[0], struct.unpack("<ii", bmp[18:26]), 32 * 3
bmp[22:26] = struct.pack("<i", -height)
bmp[offset:] = b"".join(bmp[offset + r * stride:offset + (r + 1) * stride] for r in reversed(range(height)))
write(os.path.join(image_dir, "cifar-horse-top-down.bmp"), bytes(bmp))
grey16 = np.asarray(Image.open(cifar_jpeg("dog", 0)).convert("L"), dtype=np.uint16) * 257
save(Image.fromarray(grey16), "cifar-dog-grey16.png", format="PNG")  # 16 bits a pixel
pixels = gzip.open(os.path.join(fashion, "t10k-images-idx3-ubyte.gz")).read()[16:16 + 2 * 784]
grey = Image.frombytes("L", (28, 28), pixels[:784])
save(grey, "fashion-grey.png", format="PNG")
save(grey, "fashion-grey.jpg", format="JPEG", quality=90)
alpha = Image.frombytes("L", (28, 28), pixels[784:])
save(Image.merge("LA", (grey, alpha)), "fashion-grey-alpha.png", format="PNG")
EOF

# token_file, vocabulary: data/prepare_text.py on the text fixture, as tests/test_prepare_text.sh runs it
for tokenizer in bytes bpe; do
    vocab=""
    [ "$tokenizer" = bpe ] && vocab="--vocab 400"
    # shellcheck disable=SC2086
    "$python" data/prepare_text.py --input tests/fixtures/text/tiny.txt --tokenizer "$tokenizer" $vocab \
        --out "$tmp/$tokenizer" >/dev/null
    cp "$tmp/$tokenizer/train.bin" "$corpus/token_file/valid/$tokenizer-train.bin"
    cp "$tmp/$tokenizer/val.bin" "$corpus/token_file/valid/$tokenizer-val.bin"
    cp "$tmp/$tokenizer/tokenizer.bin" "$corpus/vocabulary/valid/$tokenizer-tokenizer.bin"
done

# target: an expression, then its hold-out
printf 'sign(x0+x1+x2)\nx0=-1,x1=-1\n' > "$corpus/target/valid/maj3.txt"
printf 'x0*x1\nx0=-1,x1=-1\n' > "$corpus/target/valid/2parity.txt"
printf 'x0*x1 - 1.25*x1*x2 + 1.5*x2*x0\nx0*x1*x2=-1\n' > "$corpus/target/valid/threesym.txt"
printf 'x0*x3 + sign(x5 - x1)\n x0 * x1 = 1, x2=-1 ,x3*x4*x5=+1\n' > "$corpus/target/valid/parities.txt"
printf 'x0*x1*x2 + x3*x4*x5 - 0.5*x6\n x2 = +1 , x14=1\n' > "$corpus/target/valid/sparse.txt"
printf -- '-(x0 + x0*x1 + x0*x1*x2) * 1.25 + sign(x13 - 2*(x14 + 1))\nx0=-1\n' > "$corpus/target/valid/staircase.txt"
du -sh "$corpus"
