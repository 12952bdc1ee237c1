// tests/calibration.cpp: the yardstick of the test suite's budgets (tests/run_all.sh). Compiling it
// and running it takes a second or two; that time is one "unit" on the machine at hand, and every
// budget is a number of units, so that "past its budget" means the same on a slow machine as on a
// fast one. It does in small what the suite does in large: the compiler instantiating templates of
// the standard library and optimising loops, then a program sorting, hashing, branching and
// multiplying floats. Never edit it: a change would rescale every budget (docs/testing.md).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

// a generator of its own, so that the work is the same bits on every machine
static uint64_t state = 88172645463325252ull;
static uint64_t next_random() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

// the same work over several element types: what the compiler instantiates
template <typename Number>
Number sort_and_sum(size_t n) {
    std::vector<Number> values(n);
    for (auto& v : values) v = (Number)(next_random() % 100003) / (Number)7;
    std::sort(values.begin(), values.end(), std::greater<Number>());
    Number sum = 0;
    for (size_t i = 0; i < n; i += 3) sum += values[i];
    return sum;
}

template <typename Number>
Number matrix_product(int n) {
    std::vector<Number> a(n * n), b(n * n), c(n * n, 0);
    for (int i = 0; i < n * n; i++) a[i] = (Number)(i % 17) / 16, b[i] = (Number)(i % 13) / 12;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) c[i * n + j] += a[i * n + k] * b[k * n + j];
    return c[n * n / 2];
}

template <typename Key>
size_t count_words(const std::vector<std::string>& words) {
    std::unordered_map<Key, int> counts;
    std::map<Key, int> ordered;
    for (const auto& w : words) counts[Key(w)]++;
    for (const auto& kv : counts) ordered[kv.first] = kv.second;
    size_t total = 0;
    for (const auto& kv : ordered) total += kv.first.size() * (size_t)kv.second;
    return total;
}

int main() {
    std::vector<std::string> words(400000);
    for (auto& w : words) w = "w" + std::to_string(next_random() % 20000);
    double sums = sort_and_sum<double>(2000000) + sort_and_sum<float>(2000000) +
                  (double)sort_and_sum<int64_t>(2000000) + (double)sort_and_sum<int32_t>(2000000);
    double products = matrix_product<double>(400) + matrix_product<float>(400);
    size_t letters = count_words<std::string>(words);
    std::printf("calibration: %.6g %.6g %zu\n", sums, products, letters);
    return 0;
}
