// Any Boolean target's edge cases, each a user's wrong result before it was fixed: two targets in
// one run folder, an MDI of 0 read by the sign of its rounding residue, a large constant that hid
// the rest of the support, an overflow that sign() turned into 0 and values past a float's range,
// and a character that is not ASCII shown as a lone byte. Uses test_boolean_target.cu's helpers
// (values_of, expect_parse_error, expect_refused) and test_cli.cu's (TINY).
#include <algorithm>
#include <filesystem>
#include "test_util.h"
#include "tasks/boolean.h"  // BooleanTask, parse_boolean_target, fourier_support

#ifndef MASKPRIOR_CUDA_EMULATION
TEST_CASE("the default run folder: one per target and hold-out, however their pieces read") {
    // 2*5*x1 and 2.5*x1 both read 2.5.x1 in a folder's name: the hash of the texts tells them apart
    const std::string dir = TMP_PREFIX + "folders";
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string binary = std::filesystem::absolute(MASKPRIOR).string();
    const std::string tiny = TINY.substr(MASKPRIOR.size());  // the flags of a tiny model
    for (const char* target : {"2*5*x1", "2.5*x1"}) {
        const std::string run = "cd " + dir + " && " + binary + tiny + "--task boolean --target '" + target +
                                "' --unseen x0=-1 --steps 1 --eval-every 1";
        REQUIRE(run_command(run).exit_code == 0);
    }
    std::vector<std::string> folders;
    for (const auto& entry : std::filesystem::directory_iterator(dir + "/runs"))
        folders.push_back(entry.path().filename().string());
    std::sort(folders.begin(), folders.end());
    CAPTURE(folders.size());
    REQUIRE(folders.size() == 2);
    for (const std::string& folder : folders) {
        CAPTURE(folder);
        CHECK(folder.rfind("boolean-2.5.x1-unseen-x0=-1-", 0) == 0);
        CHECK(std::filesystem::exists(dir + "/runs/" + folder + "/metrics.json"));
    }
}
#endif

TEST_CASE("mdi_acc_cube: an MDI of 0 has no sign, whatever rounding left of it") {
    // 0.3*x0*x1 + 0.9 at x0 = x1 = -1: the MDI 0.6 + 0.3 x0 + 0.3 x1 is 0 on the held-out quarter,
    // where f is 1.2: wrong there, 75% over the cube, as for the same function scaled to exact halves
    std::vector<float> y(BOOL_POINTS, 1.0f);
    for (const char* expr : {"0.3*x0*x1 + 0.9", "0.25*x0*x1 + 0.75", "0.1*x0*x1 + 0.3"}) {
        CAPTURE(expr);
        const BooleanTask task(parse_boolean_target(expr, "x0=-1,x1=-1", BOOL_BITS));
        int zeros = 0;
        for (uint32_t p = 0; p < BOOL_POINTS; p++) zeros += task.target.unseen.holds(p) && task.mdi[p] == 0;
        CHECK(zeros == BOOL_POINTS / 4);
        CHECK(task.mdi_accuracy == 0.75);
        for (const auto& [key, value] : task.evaluate(y))
            if (key == "mdi_acc_cube") CHECK(value == 0.75);
    }
}

TEST_CASE("f's support: the tolerance follows the non-constant coefficients, not the constant") {
    const std::vector<uint32_t> with_constant = fourier_support(fourier_coefficients(values_of("1000000000000 + x0*x1"),
                                                                                     BOOL_BITS));
    CHECK(with_constant == std::vector<uint32_t>{0, 0b11});  // the constant and x0 x1
    const std::vector<float> G = structure_from_support(with_constant, BOOL_BITS);
    CHECK(G[1 * 16 + 2] == 1);  // x0 with x1
    CHECK(G[0 * 16 + 1] == 1);  // CLS with x0
    // a coefficient 1e-13 of the largest non-constant one is a residue, as before
    CHECK(fourier_support(fourier_coefficients(values_of("x0 + 0.0000000000001*x1"), BOOL_BITS)) ==
          std::vector<uint32_t>{0b1});
}

TEST_CASE("an overflow is refused, inside sign() too, and so is a value past a float's range") {
    const std::string big = "1" + std::string(200, '0');  // 1e200: a double, its square is not
    const std::string U = "x0=-1,x1=-1";
    expect_parse_error("sign(" + big + "*" + big + ") * x2", U, "its value overflows at the cube point 0");
    expect_parse_error("sign(" + big + "*" + big + " - " + big + "*" + big + ") + x2", U, "its value overflows");
    expect_parse_error("1" + std::string(39, '0') + "*x2", U,
                       "its value -1e+39 at the cube point 0 is past a float's range (3.40282e+38)");
    CHECK(parse_boolean_target("1" + std::string(38, '0') + "*x2", U, BOOL_BITS).values[0] == -1e38);
    // values a float cannot tell apart: constant as the model sees them
    expect_parse_error("1000000000000 + x2", U, "it is constant (1e+12) on the seen domain once rounded to float");
}

TEST_CASE("a character that is not ASCII is named by its code point, with the ASCII one to write") {
    const std::string minus = "\xe2\x88\x92";  // U+2212, as docs/method.md writes x0 + x1 − 1
    expect_parse_error("x0 " + minus + " x1", "x0=-1", "--target 'x0 " + minus + " x1': column 4: U+2212 MINUS SIGN "
                       "is not ASCII: write '-'");
    expect_parse_error("x0\xc3\x97x1", "x0=-1", "column 3: U+00D7 MULTIPLICATION SIGN is not ASCII: write '*'");
    expect_parse_error("x0*x1", "x0=" + minus + "1", "--unseen 'x0=" + minus + "1': column 4: U+2212 MINUS SIGN");
    expect_parse_error("x0*x1", "x0=-1,\xc2\xa0x1=1", "column 7: U+00A0 NO-BREAK SPACE is not ASCII: write a space");
    expect_parse_error("x0 + \xc3\xa9", "x0=-1", "column 6: U+00E9 is not ASCII, and the grammar is");
    expect_parse_error("x0 + \xff", "x0=-1", "column 6: the byte 0xFF is not ASCII, nor the start of a UTF-8");
    expect_parse_error("x0 + \xe2\x88", "x0=-1", "column 6: the byte 0xE2 is not ASCII, nor the start");
    // a long text is cut between two characters, not inside one: here before the minus, not in it
    const std::string long_target = std::string(54, ' ') + "x0" + minus + "x1";
    std::string message;
    try {
        parse_boolean_target(long_target, "x0=-1", BOOL_BITS);
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    CAPTURE(message);
    CHECK(message.find(std::string(54, ' ') + "x0...': column 57: U+2212") != std::string::npos);
}

#ifndef MASKPRIOR_CUDA_EMULATION
TEST_CASE("the edge cases through the program: one line, exit 2, nothing written") {
    const std::string big = "1" + std::string(200, '0');
    expect_refused("--task boolean --unseen x0=-1 --target 'sign(" + big + "*" + big + ")*x2'",
                   "its value overflows at the cube point 0");
    expect_refused("--task boolean --unseen x0=-1 --target '1" + std::string(39, '0') + "*x2'",
                   "is past a float's range");
    expect_refused("--task boolean --unseen x0=-1 --target 'x1 \xe2\x88\x92 x2'",
                   "column 4: U+2212 MINUS SIGN is not ASCII: write '-'");
    expect_refused("--task boolean --target x1 --unseen 'x0=\xe2\x88\x92\x31'", "column 4: U+2212 MINUS SIGN");
}
#endif
