// The named Boolean GOTU tasks against hand-checked values (docs/method.md, "The tasks and their G"; any
// target: test_boolean_target.cu), the epoch order,
// and the image tasks' augmentation recipes (tasks/registry.h).
#include <algorithm>
#include <set>
#include "test_util.h"
#include "tasks/boolean.h"
#include "tasks/registry.h"  // TASKS, image_recipe

TEST_CASE("Boolean domains: seen and unseen sizes") {
    CHECK(BooleanTask("2parity").train_size() == 24576);  // 3/4 of 32768
    CHECK(BooleanTask("maj3").train_size() == 24576);
    CHECK(BooleanTask("cyclic3").train_size() == 28672);  // 7/8
    for (const char* name : {"2parity", "maj3", "cyclic3"}) CHECK(BooleanTask(name).eval_size() == 32768);
}

TEST_CASE("Boolean targets by hand") {
    // point p: bit i of p is x_i (1 -> +1, 0 -> -1)
    const BooleanTask parity("2parity"), maj3("maj3"), cyclic3("cyclic3");
    CHECK(parity.target.values[0b11] == 1);    // x0 = x1 = +1
    CHECK(parity.target.values[0b01] == -1);   // x0 = +1, x1 = -1
    CHECK(parity.target.values[0] == 1);       // x0 = x1 = -1 (unseen)
    CHECK(maj3.target.values[0b011] == 1);     // +1 +1 -1
    CHECK(maj3.target.values[0b100] == -1);    // -1 -1 +1
    CHECK(cyclic3.target.values[0] == -15);    // all -1: 15 products of three -1
    CHECK(cyclic3.target.values[BOOL_POINTS - 1] == 15);
    CHECK(cyclic3.target.values[0b1] == -15 + 2 * 3);  // x0 = +1 flips the 3 products holding x0
    CHECK(maj3.target.unseen.holds(0b100));
    CHECK(!cyclic3.target.unseen.holds(0b100));
    CHECK(cyclic3.target.unseen.holds(0b1000));
}

TEST_CASE("token values: a Boolean token is its bit, CLS has none; a task without values has all 0") {
    for (const char* name : {"2parity", "maj3", "cyclic3"}) {
        BooleanTask task(name);
        std::vector<float> value = task.token_values();
        REQUIRE((int)value.size() == task.vocab);
        CHECK(value[0] == -1.0f);  // token 0 is the bit -1
        CHECK(value[1] == 1.0f);
        CHECK(value[BOOL_CLS] == 0.0f);
    }
    struct NoValues : BooleanTask {  // the interface's default, as a task of letters would have it
        NoValues() : BooleanTask("maj3") {}
        std::vector<float> token_values() const override { return Task::token_values(); }
    };
    CHECK(NoValues().token_values() == std::vector<float>(3, 0.0f));
}

TEST_CASE("tokens are [CLS, bits] with bit b as (b+1)/2") {
    BooleanTask task("maj3");
    std::vector<int> tokens(16);
    float y;
    task.eval_example(0b101, token_slot(tokens.data(), &y));
    CHECK(tokens[0] == BOOL_CLS);
    CHECK(tokens[1] == 1);
    CHECK(tokens[2] == 0);
    CHECK(tokens[3] == 1);
    CHECK(tokens[4] == 0);
    CHECK(y == 1.0f);
    for (int i = 0; i < task.train_size(); i++) {  // no training example lies in the unseen domain
        task.train_example(i, 0, token_slot(tokens.data(), &y));
        REQUIRE(!(tokens[1] == 0 && tokens[2] == 0));
    }
}

TEST_CASE("evaluating the MDI itself gives 75.00 / 87.50 / 92.83 % cube accuracy") {
    const std::pair<const char*, double> expected[] = {{"2parity", 0.75}, {"maj3", 0.875}, {"cyclic3", 0.9283}};
    for (auto [name, acc] : expected) {
        BooleanTask task(name);
        std::vector<float> mdi(BOOL_POINTS);
        for (int p = 0; p < BOOL_POINTS; p++) mdi[p] = (float)task.mdi[p];
        Metrics m = task.evaluate(mdi);
        auto get = [&](const std::string& key) {
            for (auto& [k, v] : m) if (k == key) return v;
            FAIL("no metric " << key);
            return 0.0;
        };
        CHECK(get("acc_cube") == doctest::Approx(acc).epsilon(1e-4));
        CHECK(get("mdi_acc_cube") == doctest::Approx(acc).epsilon(1e-4));
        CHECK(get("mdi_agreement") == 1.0);  // the MDI is closest to itself
        CHECK(get("mse_cube") > 0);
    }
}

TEST_CASE("evaluating f itself gives perfect metrics") {
    BooleanTask task("cyclic3");
    std::vector<float> f(BOOL_POINTS);
    for (int p = 0; p < BOOL_POINTS; p++) f[p] = (float)task.target.values[p];
    for (auto& [key, value] : task.evaluate(f)) {
        if (key == "acc_cube" || key == "acc_unseen" || key == "exact_cube") CHECK(value == 1.0);
        if (key == "mse_cube" || key == "mse_unseen" || key == "mdi_agreement") CHECK(value == 0.0);
    }
}

TEST_CASE("structure G by hand") {
    auto G = BooleanTask("2parity").structure();  // {CLS, x0, x1} all pairs; self
    REQUIRE(G.size() == 256);
    CHECK(G[0 * 16 + 2] == 1);  // CLS - x1
    CHECK(G[2 * 16 + 1] == 1);  // x1 - x0
    CHECK(G[0 * 16 + 3] == 0);  // CLS - x2
    CHECK(G[5 * 16 + 5] == 1);  // x4 with itself
    CHECK(G[5 * 16 + 6] == 0);
    auto M = BooleanTask("maj3").structure();
    CHECK(M[3 * 16 + 0] == 1);  // x2 - CLS
    CHECK(M[4 * 16 + 0] == 0);  // x3 - CLS
    auto Y = BooleanTask("cyclic3").structure();
    for (int t = 0; t < 16; t++) CHECK((Y[0 * 16 + t] == 1 && Y[t * 16 + 0] == 1));  // CLS with all, both ways
    CHECK(Y[1 * 16 + 1] == 1);   // x0 -> x0
    CHECK(Y[1 * 16 + 3] == 1);   // x0 -> x2
    CHECK(Y[3 * 16 + 1] == 0);   // not x2 -> x0: x2's monomial is x2 x3 x4
    CHECK(Y[1 * 16 + 4] == 0);   // x0 -> x3
    CHECK(Y[15 * 16 + 1] == 1);  // x14 -> x0 (mod 15)
    CHECK(Y[15 * 16 + 2] == 1);  // x14 -> x1
    int ones = 0;
    for (float g : Y) ones += g != 0;
    CHECK(ones == 16 + 15 + 15 * 3);  // CLS row, CLS column (without CLS-CLS), three keys per bit
}

TEST_CASE("epoch order: every epoch is a permutation, epochs differ, a seed fixes it") {
    EpochOrder a(7, 100), b(7, 100), c(8, 100);
    std::vector<int> e0, e1, other;
    for (int k = 0; k < 100; k++) e0.push_back(a.example(k));
    for (int k = 100; k < 200; k++) e1.push_back(a.example(k));
    for (int k = 0; k < 100; k++) other.push_back(c.example(k));
    CHECK(std::set<int>(e0.begin(), e0.end()).size() == 100);
    CHECK(std::set<int>(e1.begin(), e1.end()).size() == 100);
    CHECK(e0 != e1);
    CHECK(e0 != other);
    CHECK(b.example(150) == e1[50]);  // random access: resuming needs only the step
}

TEST_CASE("every image task has an augmentation recipe, and no other task has one") {
    for (const TaskKind& kind : TASKS) {
        CAPTURE(kind.name);
        if (kind.family == TASKS_IMAGES) CHECK_NOTHROW(image_recipe(kind.name));
        else CHECK_THROWS_AS(image_recipe(kind.name), std::logic_error);
    }
    CHECK(!image_recipe("mnist").flip);  // a mirrored digit is no digit
    CHECK(image_recipe("fashion-mnist").flip);
    CHECK(image_recipe("mnist").crop_pad == 0);  // measured: the crop costs short runs (docs/results.md)
    CHECK(image_recipe("fashion-mnist").crop_pad == 2);
    CHECK(image_recipe("cifar10").crop_pad == 4);
}
