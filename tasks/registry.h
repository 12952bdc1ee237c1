// tasks/registry.h: every --task in one table: its name, its family and what it is in a line.
// --help, the flag checks and `maskprior --list tasks` take the names from here; a family's tasks
// share their flags and their recipe (run/options.h), and run/setup.cuh's make_task builds one.
// To add a task to a family: write it in the family's file (tasks/boolean.h, tasks/arithmetic.h,
// ...) and add its line here.
#pragma once
#include <stdexcept>
#include <string>

enum TaskFamily {
    TASKS_BOOLEAN,     // GOTU's Boolean functions on 15 bits (tasks/boolean.h)
    TASKS_ARITHMETIC,  // Lee et al.'s arithmetic, a causal decoder (tasks/arithmetic.h)
    TASKS_IMAGES,      // image classification with a ViT (tasks/vision.h)
    TASKS_LANGUAGE,    // a causal language model on a token folder (tasks/language.h)
};

struct TaskKind {
    const char* name;
    TaskFamily family;
    const char* help;  // one line for --help and --list tasks
};

inline const TaskKind TASKS[] = {
    {"2parity", TASKS_BOOLEAN, "x0·x1; unseen: x0 = x1 = -1"},
    {"maj3", TASKS_BOOLEAN, "sign(x0 + x1 + x2); unseen: x0 = x1 = -1"},
    {"cyclic3", TASKS_BOOLEAN, "sum_i x_i x_i+1 x_i+2, i mod 15; unseen: x0 = x1 = x2 = -1"},
    {"threesym", TASKS_BOOLEAN, "x0x1 - 1.25 x1x2 + 1.5 x2x0; unseen: x0x1x2 = -1 (half)"},
    {"boolean", TASKS_BOOLEAN, "any target: --target EXPR --unseen COND (docs/tasks.md)"},
    {"add3", TASKS_ARITHMETIC, "3-digit addition, answer reversed: $123+456=9750$"},
    {"mul2", TASKS_ARITHMETIC, "2-digit multiplication, answer reversed"},
    {"mnist", TASKS_IMAGES, "MNIST's handwritten digits, the four IDX files (data/get_mnist.sh)"},
    {"fashion-mnist", TASKS_IMAGES, "Fashion-MNIST's IDX files (Debian's dataset-fashion-mnist)"},
    {"cifar10", TASKS_IMAGES, "CIFAR-10's official binary version (data/get_cifar.sh)"},
    {"cifar100", TASKS_IMAGES, "CIFAR-100's official binary version"},
    {"images", TASKS_IMAGES, "an image folder: DIR/train/<class>/*, DIR/test/<class>/*"},
    {"lm", TASKS_LANGUAGE, "a token folder that data/prepare_text.py wrote"},
};

// The image tasks' augmentation, each its data's usual one (a flag given always wins): a random
// crop of 2 pixels of padding on Fashion-MNIST's 28-pixel images, 4 on CIFAR's 32 and on image
// folders, none on the digits (measured on 4,000 training digits: over 938 steps, the length of
// one epoch of the full MNIST, it costs them 5 points; it ties at twice that and gains 2.7 at four
// times; docs/results.md, "Digits"); a random horizontal flip for all but the digits, which a
// mirror turns into no digit (a 2, a 7) or into another (a 5 and a 2 look alike mirrored).
// --help and the start-up table name it.
struct ImageRecipe {
    const char* task;
    int crop_pad;  // the random crop's padding
    bool flip;     // the random horizontal flip
};

inline const ImageRecipe IMAGE_RECIPES[] = {
    {"mnist", 0, false}, {"fashion-mnist", 2, true}, {"cifar10", 4, true}, {"cifar100", 4, true}, {"images", 4, true},
};

// The image task `task`'s recipe; every image task of TASKS has one (tests/test_tasks.cu checks)
inline const ImageRecipe& image_recipe(const std::string& task) {
    for (const ImageRecipe& recipe : IMAGE_RECIPES)
        if (task == recipe.task) return recipe;
    throw std::logic_error("no augmentation recipe for the task " + task);
}

// The task named `name`, or nullptr
inline const TaskKind* find_task(const std::string& name) {
    for (const TaskKind& kind : TASKS)
        if (name == kind.name) return &kind;
    return nullptr;
}

inline bool task_in_family(const std::string& name, TaskFamily family) {
    const TaskKind* kind = find_task(name);
    return kind && kind->family == family;
}

// "2parity, maj3, ...": the names of a family's tasks, for an error line that lists them
inline std::string family_names(TaskFamily family) {
    std::string names;
    for (const TaskKind& kind : TASKS)
        if (kind.family == family) names += (names.empty() ? "" : ", ") + std::string(kind.name);
    return names;
}

inline bool is_image_task(const std::string& task) { return task_in_family(task, TASKS_IMAGES); }
inline bool is_language_task(const std::string& task) { return task_in_family(task, TASKS_LANGUAGE); }
inline bool is_arithmetic_task(const std::string& task) { return task_in_family(task, TASKS_ARITHMETIC); }
