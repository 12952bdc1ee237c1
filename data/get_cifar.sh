#!/bin/sh
# data/get_cifar.sh: downloads the official binary version of CIFAR-10 or CIFAR-100 (Krizhevsky,
# https://www.cs.toronto.edu/~kriz/cifar.html), checks its md5, unpacks it and prints the
# --data-dir to use. Needs the internet, curl or wget, md5sum and tar.
#
#   sh data/get_cifar.sh [10|100] [DEST]      DEST: where the archive and its folder go (data/)
#
#   10:  cifar-10-binary.tar.gz  (162 MB)  -> DEST/cifar-10-batches-bin/
#        data_batch_1.bin .. data_batch_5.bin, test_batch.bin, batches.meta.txt
#   100: cifar-100-binary.tar.gz (161 MB)  -> DEST/cifar-100-binary/
#        train.bin, test.bin, fine_label_names.txt, coarse_label_names.txt
#
# Run again, it downloads nothing when DEST already holds an archive with the right md5, and
# unpacks it again. An archive with another md5 is refused and deleted. CIFAR_MIRROR replaces
# the address the archive comes from (a folder holding it; curl also reads file:// addresses).
set -eu

which=${1:-10}
dest=${2:-data}
case "$which" in
    10)  archive=cifar-10-binary.tar.gz;  md5=c32a1d4ab5d03f1284b67883e8d87530; folder=cifar-10-batches-bin ;;
    100) archive=cifar-100-binary.tar.gz; md5=03b5dce01913d631647c71ecec9e9cb8; folder=cifar-100-binary ;;
    *)   echo "get_cifar.sh: the data set is 10 or 100, not '$which' (usage: sh data/get_cifar.sh [10|100] [DEST])" >&2
         exit 2 ;;
esac
url=${CIFAR_MIRROR:-https://www.cs.toronto.edu/~kriz}/$archive
mkdir -p "$dest"
path=$dest/$archive

md5_of() { md5sum "$1" | cut -d' ' -f1; }

if [ -f "$path" ] && [ "$(md5_of "$path")" = "$md5" ]; then
    echo "get_cifar.sh: $path is already here (md5 checked)"
else
    echo "get_cifar.sh: downloading $url"
    if command -v curl >/dev/null 2>&1; then
        curl --fail --location --output "$path.part" "$url"
    elif command -v wget >/dev/null 2>&1; then
        wget --output-document="$path.part" "$url"
    else
        echo "get_cifar.sh: neither curl nor wget is installed" >&2
        exit 1
    fi
    got=$(md5_of "$path.part")
    if [ "$got" != "$md5" ]; then
        rm -f "$path.part"
        echo "get_cifar.sh: $url has md5 $got, not the official $md5: refused (deleted)" >&2
        exit 1
    fi
    mv "$path.part" "$path"
fi

tar -xzf "$path" -C "$dest"
echo "get_cifar.sh: unpacked $dest/$folder; use --data-dir $dest/$folder"
