#!/bin/sh
# data/get_mnist.sh: downloads MNIST's four IDX files (LeCun, Cortes and Burges, the handwritten
# digits: 60,000 training and 10,000 test images of 28 x 28), checks each one's md5, and prints
# the --data-dir to use with --task mnist. Needs the internet, curl or wget, and md5sum.
#
#   sh data/get_mnist.sh [DEST]      DEST: the folder the files go into (data/mnist)
#
#   train-images-idx3-ubyte.gz  train-labels-idx1-ubyte.gz
#   t10k-images-idx3-ubyte.gz   t10k-labels-idx1-ubyte.gz   (kept gzipped: the loader reads .gz)
#
# They come from the mirror PyTorch's torchvision reads (yann.lecun.com, the original address,
# refuses most downloads now); the md5 sums are those of the original files. Run again, it
# downloads only what is missing or has another md5; a file with another md5 is refused and
# deleted. MNIST_MIRROR replaces the address (a folder holding the files; curl also reads file://).
set -eu

dest=${1:-data/mnist}
mirror=${MNIST_MIRROR:-https://ossci-datasets.s3.amazonaws.com/mnist}
mkdir -p "$dest"

md5_of() { md5sum "$1" | cut -d' ' -f1; }

fetch() {  # fetch FILE MD5
    path=$dest/$1
    if [ -f "$path" ] && [ "$(md5_of "$path")" = "$2" ]; then
        echo "get_mnist.sh: $path is already here (md5 checked)"
        return
    fi
    echo "get_mnist.sh: downloading $mirror/$1"
    if command -v curl >/dev/null 2>&1; then
        curl --fail --location --output "$path.part" "$mirror/$1"
    elif command -v wget >/dev/null 2>&1; then
        wget --output-document="$path.part" "$mirror/$1"
    else
        echo "get_mnist.sh: neither curl nor wget is installed" >&2
        exit 1
    fi
    got=$(md5_of "$path.part")
    if [ "$got" != "$2" ]; then
        rm -f "$path.part"
        echo "get_mnist.sh: $mirror/$1 has md5 $got, not the official $2: refused (deleted)" >&2
        exit 1
    fi
    mv "$path.part" "$path"
}

fetch train-images-idx3-ubyte.gz f68b3c2dcbeaaa9fbdd348bbdeb94873
fetch train-labels-idx1-ubyte.gz d53e105ee54ea40749a09fcbcd1e9432
fetch t10k-images-idx3-ubyte.gz 9fb629c4189551a2d022fa330f9573f3
fetch t10k-labels-idx1-ubyte.gz ec29112dd5afa0611ce80d1b7f02629c
echo "get_mnist.sh: use --task mnist --data-dir $dest"
