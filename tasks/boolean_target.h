// tasks/boolean_target.h: a Boolean target written as text (--target EXPR) and the part of the cube
// held out of training (--unseen COND), parsed and evaluated on the whole cube (docs/tasks.md has
// the grammar with examples). Host only.
//
// EXPR, a real-valued expression in the bits; spaces may stand anywhere between its pieces:
//     sum     := product (('+' | '-') product)*
//     product := factor ('*' factor)*
//     factor  := ('+' | '-') factor | NUMBER | BIT | 'sign' '(' sum ')' | '(' sum ')'
//     NUMBER  := digits, or digits '.' digits           (2, 0.5, 1.25; -1.25 is '-' then 1.25)
//     BIT     := 'x' and an index 0 .. bits-1, no leading zero (x0 .. x14 on 15 bits)
// sign(v) is +1 for v > 0, -1 for v < 0 and 0 at 0. A product is written with '*' (2x0 and
// x0 x1 are refused, not guessed). COND: constraints joined by commas, each a bit or a product of
// distinct bits set to -1 or +1 (a value is -1, +1 or 1): x0=-1,x1=-1 holds out a subcube,
// x0*x1*x2=-1 half the cube (tasks/holdout.h); the held-out part is the points where every one
// holds. Both are ASCII; every error is one line that names the flag and the column, the bit or
// the constraint at fault, and a character that is not ASCII by its code point and name.
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>
#include "tasks/holdout.h"  // HoldOut, Parity, ParityBasis

// The expression as a program for a stack machine, in postfix order: x0*x1 + 2 is
// BIT 0, BIT 1, MUL, NUMBER 2, ADD.
enum TargetOp { TARGET_NUMBER, TARGET_BIT, TARGET_ADD, TARGET_SUB, TARGET_MUL, TARGET_NEG, TARGET_SIGN };

struct TargetStep {
    TargetOp op;
    double number = 0;  // TARGET_NUMBER's value
    int bit = 0;        // TARGET_BIT's index
};

struct TargetProgram {
    std::vector<TargetStep> steps;

    // The expression's value at cube point p (x_i = +1 where bit i of p is set)
    double at(uint32_t p, std::vector<double>& stack) const {
        stack.clear();
        for (const TargetStep& s : steps) {
            if (s.op == TARGET_NUMBER) { stack.push_back(s.number); continue; }
            if (s.op == TARGET_BIT) { stack.push_back(p >> s.bit & 1 ? 1.0 : -1.0); continue; }
            double& top = stack.back();
            if (s.op == TARGET_NEG) top = -top;
            else if (s.op == TARGET_SIGN)  // an overflow inside stays one (NaN), for the checks to refuse
                top = !std::isfinite(top) ? NAN : top > 0 ? 1.0 : top < 0 ? -1.0 : 0.0;
            else {
                const double right = top;
                stack.pop_back();
                double& left = stack.back();
                left = s.op == TARGET_ADD ? left + right : s.op == TARGET_SUB ? left - right : left * right;
            }
        }
        return stack.back();
    }
};

// The text of a flag's value for an error line: as given, or its start when it is long (cut
// between two UTF-8 characters, not inside one); a control character (a newline) as '?', so that
// the error stays one line
inline std::string shown_text(const std::string& text) {
    size_t cut = 57;
    while (text.size() > 60 && cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
    std::string shown = text.size() <= 60 ? text : text.substr(0, cut) + "...";
    for (char& c : shown)
        if ((unsigned char)c < 0x20 || c == 0x7f) c = '?';
    return shown;
}

// The characters that pass for ASCII ones in a document or a web page, and the one to write
struct LookAlike {
    uint32_t code_point;
    const char* name;
    const char* write;
};
inline const LookAlike LOOK_ALIKES[] = {
    {0x2212, "MINUS SIGN", "'-'"},           {0x2013, "EN DASH", "'-'"},
    {0x2014, "EM DASH", "'-'"},              {0x2010, "HYPHEN", "'-'"},
    {0x00D7, "MULTIPLICATION SIGN", "'*'"},  {0x22C5, "DOT OPERATOR", "'*'"},
    {0x00B7, "MIDDLE DOT", "'*'"},           {0x2217, "ASTERISK OPERATOR", "'*'"},
    {0x00A0, "NO-BREAK SPACE", "a space"},   {0x2009, "THIN SPACE", "a space"},
    {0x202F, "NARROW NO-BREAK SPACE", "a space"},
    {0x2018, "LEFT SINGLE QUOTATION MARK", "an ASCII ' to quote in the shell"},
    {0x2019, "RIGHT SINGLE QUOTATION MARK", "an ASCII ' to quote in the shell"},
    {0x201C, "LEFT DOUBLE QUOTATION MARK", "an ASCII ' to quote in the shell"},
    {0x201D, "RIGHT DOUBLE QUOTATION MARK", "an ASCII ' to quote in the shell"},
};

// Why the character at byte `at` of text, not ASCII, is refused, naming it by its code point
// (UTF-8): "U+2212 MINUS SIGN is not ASCII: write '-'"; a byte that starts no UTF-8 character by
// its value
inline std::string non_ascii_text(const std::string& text, size_t at) {
    const unsigned char lead = text[at];
    const int length = lead >= 0xF0 && lead < 0xF5 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 0;
    uint32_t code = length == 2 ? lead & 0x1F : length == 3 ? lead & 0x0F : lead & 0x07;
    bool valid = length > 0 && at + length <= text.size();
    for (int k = 1; valid && k < length; k++) {
        const unsigned char next = text[at + k];
        valid = (next & 0xC0) == 0x80;
        code = code << 6 | (next & 0x3F);
    }
    char named[80];
    if (!valid) {
        snprintf(named, sizeof named, "the byte 0x%02X is not ASCII, nor the start of a UTF-8 character", lead);
        return named;
    }
    snprintf(named, sizeof named, "U+%04X", code);
    for (const LookAlike& c : LOOK_ALIKES)
        if (c.code_point == code) return std::string(named) + " " + c.name + " is not ASCII: write " + c.write;
    return std::string(named) + " is not ASCII, and the grammar is (docs/tasks.md)";
}

// Where text's first character that is not ASCII starts, or npos
inline size_t first_non_ascii(const std::string& text) {
    for (size_t i = 0; i < text.size(); i++)
        if ((unsigned char)text[i] >= 0x80) return i;
    return std::string::npos;
}

// A recursive-descent parser of EXPR into a TargetProgram; errors throw std::runtime_error
// "column N: why" (1-based columns).
class TargetParser {
public:
    static constexpr size_t MAX_LENGTH = 10000;  // characters: 2^15 points x its steps stays quick
    static constexpr int MAX_DEPTH = 100;        // nested parentheses, signs and sign() calls

    TargetParser(const std::string& text, int bits) : text_(text), bits_(bits) {}

    TargetProgram parse() {
        if (text_.size() > MAX_LENGTH) error(MAX_LENGTH, "the target is longer than 10000 characters");
        const size_t foreign = first_non_ascii(text_);
        if (foreign != std::string::npos) error(foreign, non_ascii_text(text_, foreign));
        skip_spaces();
        if (pos_ == text_.size()) error(pos_, "the target is empty");
        sum();
        skip_spaces();
        if (pos_ < text_.size()) {
            if (text_[pos_] == ')') error(pos_, "this ')' closes no '('");
            error(pos_, "unexpected '" + shown_text(text_.substr(pos_, 1)) + "'");
        }
        return program_;
    }

private:
    const std::string& text_;
    int bits_;
    size_t pos_ = 0;
    int depth_ = 0;
    TargetProgram program_;

    [[noreturn]] void error(size_t at, const std::string& why) const {
        throw std::runtime_error("column " + std::to_string(at + 1) + ": " + why);
    }
    void skip_spaces() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) pos_++;
    }
    bool at_char(char c) {
        skip_spaces();
        return pos_ < text_.size() && text_[pos_] == c;
    }
    static bool is_digit(char c) { return c >= '0' && c <= '9'; }
    static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
    void emit(TargetOp op) { program_.steps.push_back({op}); }
    void deeper(size_t at) {
        if (++depth_ > MAX_DEPTH) error(at, "nested deeper than 100 levels");
    }

    void sum() {
        product();
        for (;;) {
            if (at_char('+')) { pos_++; product(); emit(TARGET_ADD); }
            else if (at_char('-')) { pos_++; product(); emit(TARGET_SUB); }
            else return;
        }
    }

    void product() {
        factor();
        for (;;) {
            if (at_char('*')) { pos_++; factor(); emit(TARGET_MUL); continue; }
            if (pos_ < text_.size() && (is_digit(text_[pos_]) || is_letter(text_[pos_]) || text_[pos_] == '(' ||
                                        text_[pos_] == '.'))
                error(pos_, "a factor follows another without an operator: write '*' for a product");
            return;
        }
    }

    void factor() {
        skip_spaces();
        if (pos_ == text_.size()) error(pos_, "the target ends where a number, a bit or '(' should follow");
        const size_t start = pos_;
        const char c = text_[pos_];
        if (c == '+' || c == '-') {
            pos_++;
            deeper(start);
            factor();
            depth_--;
            if (c == '-') emit(TARGET_NEG);
        } else if (c == '(') {
            pos_++;
            deeper(start);
            sum();
            if (!at_char(')')) error(start, "this '(' is not closed");
            pos_++;
            depth_--;
        } else if (is_digit(c)) {
            number();
        } else if (is_letter(c)) {
            name();
        } else if (c == '.') {
            error(start, "a number starts with a digit: 0.5, not .5");
        } else if (c == ')' || c == '*') {
            error(start, "'" + std::string(1, c) + "' where a number, a bit or '(' should be");
        } else {
            error(start, "unexpected '" + shown_text(std::string(1, c)) + "'");
        }
    }

    void number() {
        const size_t start = pos_;
        while (pos_ < text_.size() && is_digit(text_[pos_])) pos_++;
        if (pos_ < text_.size() && text_[pos_] == '.') {
            pos_++;
            if (pos_ == text_.size() || !is_digit(text_[pos_])) error(pos_, "a number needs digits after its '.'");
            while (pos_ < text_.size() && is_digit(text_[pos_])) pos_++;
        }
        const double value = std::strtod(text_.substr(start, pos_ - start).c_str(), nullptr);
        if (!std::isfinite(value)) error(start, "the number is too large");
        TargetStep step{TARGET_NUMBER};
        step.number = value;
        program_.steps.push_back(step);
    }

    void name() {
        const size_t start = pos_;
        while (pos_ < text_.size() && (is_letter(text_[pos_]) || is_digit(text_[pos_]))) pos_++;
        const std::string word = text_.substr(start, pos_ - start);
        if (word == "sign") {
            if (!at_char('(')) error(pos_, "sign takes its argument in parentheses: sign(...)");
            const size_t open = pos_++;
            deeper(start);
            sum();
            if (!at_char(')')) error(open, "this '(' is not closed");
            pos_++;
            depth_--;
            emit(TARGET_SIGN);
            return;
        }
        const std::string bits_text = "the bits are x0..x" + std::to_string(bits_ - 1);
        const bool indexed = word.size() >= 2 && word[0] == 'x' &&
                             word.find_first_not_of("0123456789", 1) == std::string::npos;
        if (!indexed) error(start, "unknown name '" + shown_text(word) + "' (" + bits_text + ", the function sign)");
        if (word.size() > 2 && word[1] == '0') error(start, "write the bit without a leading zero, not " + word);
        if (word.size() > 6 || std::atoi(word.c_str() + 1) >= bits_)
            error(start, shown_text(word) + " is not a bit: " + bits_text + " (" + std::to_string(bits_) + " bits)");
        TargetStep step{TARGET_BIT};
        step.bit = std::atoi(word.c_str() + 1);
        program_.steps.push_back(step);
    }
};

// --unseen COND on `bits` bits: the held-out part, its constraints independent (none follows from
// those before it, none contradicts them: that would hold out nothing) and at least one (none would
// hold out the whole cube). Throws std::runtime_error naming the flag and the column, the bit or
// the constraint at fault.
inline HoldOut parse_unseen(const std::string& text, int bits) {
    const std::string flag = "--unseen '" + shown_text(text) + "': ";
    HoldOut unseen;
    ParityBasis basis;  // the constraints so far, to tell whether the next follows from them
    size_t pos = 0;
    auto spaces = [&] {
        while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) pos++;
    };
    auto column = [&](size_t at, const std::string& why) {
        return std::runtime_error(flag + "column " + std::to_string(at + 1) + ": " + why);
    };
    const size_t foreign = first_non_ascii(text);
    if (foreign != std::string::npos) throw column(foreign, non_ascii_text(text, foreign));
    spaces();
    if (pos == text.size())
        throw std::runtime_error(flag + "no constraint: the whole cube would be held out, leaving nothing to train on");
    for (;;) {
        uint32_t product = 0;
        std::string written;  // the product as a line names it: x0*x1
        for (;;) {  // BIT ('*' BIT)*
            spaces();
            const size_t start = pos;
            if (pos == text.size() || text[pos] != 'x')
                throw column(pos, "expected a bit such as x0, or a product x0*x1, then =-1 or =+1");
            pos++;
            const size_t digits = pos;
            while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') pos++;
            const std::string bit = text.substr(start, pos - start);
            if (pos == digits) throw column(start, "expected a bit such as x0, or a product x0*x1, then =-1 or =+1");
            if (bit.size() > 2 && bit[1] == '0') throw column(start, "write the bit without a leading zero, not " + bit);
            if (bit.size() > 6 || std::atoi(bit.c_str() + 1) >= bits)
                throw std::runtime_error(flag + shown_text(bit) + " is not a bit: the bits are x0..x" +
                                         std::to_string(bits - 1) + " (" + std::to_string(bits) + " bits)");
            const int index = std::atoi(bit.c_str() + 1);
            written += (written.empty() ? "" : "*") + bit;
            if (product >> index & 1)
                throw std::runtime_error(flag + written + ": " + bit + " twice in one product (" + bit + "*" + bit +
                                         " is 1): write each bit once");
            product |= 1u << index;
            spaces();
            if (pos == text.size() || text[pos] != '*') break;
            pos++;
        }
        const bool single = popcount(product) == 1;
        if (pos == text.size() || text[pos] != '=') throw column(pos, "expected '=' and -1 or +1 after " + written);
        pos++;
        spaces();
        const size_t value_start = pos;
        if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) pos++;
        while (pos < text.size() && ((text[pos] >= '0' && text[pos] <= '9') || text[pos] == '.')) pos++;
        const std::string value = text.substr(value_start, pos - value_start);
        char* end = nullptr;
        const double v = std::strtod(value.c_str(), &end);
        const std::string constraint = written + "=" + shown_text(value);
        if (value.empty() || *end != '\0' || (v != 1.0 && v != -1.0))
            throw std::runtime_error(flag + constraint + (single ? ": a fixed bit's" : ": a product's") +
                                     " value is -1 or +1");
        for (const Parity& before : unseen.parities)
            if (before.product == product)
                throw std::runtime_error(flag + written + (single ? " is fixed twice" : " is constrained twice"));
        const Parity parity{product, v > 0 ? 1 : -1};
        const Parity reduced = basis.reduce(parity);  // (∅, ±1): it follows from those before, or contradicts them
        if (reduced.product == 0 && reduced.sign > 0)
            throw std::runtime_error(flag + constraint + " follows from the constraints before it: give each once");
        if (reduced.product == 0)
            throw std::runtime_error(flag + constraint + " contradicts the constraints before it: no point would " +
                                     "be held out");
        basis.add(reduced);
        unseen.parities.push_back(parity);
        spaces();
        if (pos == text.size()) return unseen;
        if (text[pos] != ',') throw column(pos, "expected ',' between two constraints, or the end");
        pos++;
    }
}

// A target, parsed and evaluated on the whole cube, with its held-out part
struct BooleanTarget {
    std::string text;         // EXPR as given
    std::string unseen_text;  // COND as given
    int bits = 0;
    std::vector<double> values;  // (2^bits) f at every cube point
    HoldOut unseen;
};

// --target EXPR and --unseen COND on `bits` bits, checked: the expression parses; its value is
// finite everywhere, sign()'s arguments included, and within a float's range (the model trains in
// float); and it is not constant on the seen domain (the cube outside the held-out part), neither
// in double nor once rounded to float. Throws std::runtime_error, one line naming the flag and the
// column, the bit or the value.
inline BooleanTarget parse_boolean_target(const std::string& expr, const std::string& cond, int bits) {
    BooleanTarget target;
    target.text = expr;
    target.unseen_text = cond;
    target.bits = bits;
    const std::string flag = "--target '" + shown_text(expr) + "': ";
    TargetProgram program;
    try {
        program = TargetParser(expr, bits).parse();
    } catch (const std::runtime_error& e) {
        throw std::runtime_error(flag + e.what());
    }
    target.unseen = parse_unseen(cond, bits);
    const uint32_t points = 1u << bits;
    target.values.resize(points);
    std::vector<double> stack;
    char value[160];
    for (uint32_t p = 0; p < points; p++) {
        const double v = target.values[p] = program.at(p, stack);
        if (!std::isfinite(v))
            throw std::runtime_error(flag + "its value overflows at the cube point " + std::to_string(p));
        if (std::isinf((float)v)) {
            snprintf(value, sizeof value, "its value %g at the cube point %u is past a float's range (%g): the model "
                     "trains in float", v, p, FLT_MAX);
            throw std::runtime_error(flag + value);
        }
    }
    uint32_t first_seen = 0;  // a seen point: the constraints are independent, so U is not the whole cube
    while (target.unseen.holds(first_seen)) first_seen++;
    const double seen_value = target.values[first_seen];
    bool constant = true, constant_in_float = true;
    for (uint32_t p = 0; p < points && constant_in_float; p++) {
        if (target.unseen.holds(p)) continue;
        constant = constant && target.values[p] == seen_value;
        constant_in_float = (float)target.values[p] == (float)seen_value;
    }
    if (constant_in_float) {
        snprintf(value, sizeof value, "%g", seen_value);
        throw std::runtime_error(flag + "it is constant (" + value + ") on the seen domain" +
                                 (constant ? "" : " once rounded to float, as the model trains") +
                                 ", the cube outside --unseen '" + shown_text(cond) + "': nothing to learn");
    }
    return target;
}
