// The weights' moving average (recipe/ema.cuh, --ema): the update by hand and through training
// steps, evaluate_run's evaluation of the average against a second model whose parameters are
// the average, the checkpoint and a resume bit-exact with it (killed and continued too), the
// refusal of a checkpoint without it; on the GPU the update against the CPU, and evaluate_run's
// parameters put back bit for bit under graphs. The CPU and command-line cases use
// test_model.cu's and test_cli.cu's helpers, so they run in tests/unit_tests alone.
#include "test_util.h"
#include "recipe/ema.cuh"
#include "run/evaluate.cuh"  // evaluate, evaluate_run
#include "run/step.cuh"      // training_step
#include "tasks/boolean.h"

// A regression model of maj3's shape, for evaluate
static Config ema_task_config(const Task& task) {
    Config c;
    c.V = task.vocab; c.T = task.seq_len; c.C = 8; c.L = 2; c.NH = 2; c.HS = 4; c.MLP = 8; c.OUT = 1;
    c.mask_heads = 1;
    return c;
}

// Five training steps of model on random batches of the task's tokens and random targets
static void ema_train(Model& model, const Task& task, Rng& rng) {
    std::vector<int> tokens((size_t)model.B * task.seq_len);
    std::vector<float> y(model.B);
    for (int step = 0; step < 5; step++) {
        for (int& t : tokens) t = rng.below(task.vocab);
        for (float& v : y) v = rng.uniform(-1, 1);
        training_step(model, tokens.data(), y.data(), nullptr, 3e-2f, 0.0f, step);
    }
}

// maj3 evaluated on its first 2,048 cube points, scored by their mean output: evaluate_run against
// evaluate needs an evaluation, not the whole cube's 32,768 points (38 s of the emulated tests)
struct Maj3FirstPoints : BooleanTask {
    static constexpr int POINTS = 2048;
    Maj3FirstPoints() : BooleanTask("maj3") {}
    int eval_size() const override { return POINTS; }
    struct MeanOutput : Scorer {
        double sum = 0;
        void add(int, int rows, const float* outputs) override {
            for (int r = 0; r < rows; r++) sum += outputs[r];  // outputs (rows, 1)
        }
        Metrics metrics() const override { return {{"mean_output", sum / POINTS}}; }
    };
    std::unique_ptr<Scorer> scorer() const override { return std::make_unique<MeanOutput>(); }
};

// evaluate_run on a model with the average against evaluate on a second model whose parameters are
// that average: the same loss and metrics, as ema_loss and ema_<metric>; the parameters put back
static void check_evaluate_run(Device dev, bool graph) {
    const Maj3FirstPoints task;
    const Config c = ema_task_config(task);
    Model model, second;
    ModelOwner owners[2] = {{model}, {second}};
    for (Model* m : {&model, &second}) {
        model_build(*m, c, dev, 16);
        m->kernels.graph = graph;
    }
    Rng rng(5);
    std::vector<float> init(model.num_params);
    init_default(c, init.data(), rng);
    model_upload(model, model.params_mem, init);
    weight_average_start(model.ema, dev, model.params_mem, model.num_params, 0.7f);
    ema_train(model, task, rng);
    const std::vector<float> trained = model_download(model, model.params_mem);
    const std::vector<float> average = model_download(model, model.ema.weights);
    REQUIRE(average != trained);
    const Structure G = {1, c.T, task.structure()};
    const PersistenceReference ref{init, Matrix()};
    const std::vector<float> positions;
    const Evaluation ev = evaluate_run(model, task, G, ref, positions);
    CHECK(model_download(model, model.params_mem) == trained);  // put back, bit for bit
    const Evaluation plain = evaluate(model, task, G, ref, positions);
    model_upload(second, second.params_mem, average);
    const Evaluation of_average = evaluate(second, task, G, ref, positions);
    Metrics expected = plain.metrics;
    expected.push_back({"ema_loss", of_average.loss});
    for (const auto& [key, value] : of_average.metrics) expected.push_back({"ema_" + key, value});
    CHECK(ev.metrics == expected);
    CHECK(ev.loss == plain.loss);
    CHECK(of_average.loss != plain.loss);
}

#ifndef MASKPRIOR_EMULATED_TESTS  // the CPU cases: tests/unit_tests alone
TEST_CASE("the moving average by hand: ema = D·ema + (1-D)·params, from the parameters at the start") {
    std::vector<float> params = {1, -2, 4};
    WeightAverage ema;
    weight_average_start(ema, DEVICE_CPU, params.data(), 3, 0.5f);
    const std::vector<std::vector<float>> steps = {{3, 0, 0}, {2, -1, 2}, {0, 1, 6}};
    const std::vector<std::vector<float>> expected = {{2, -1, 2}, {2, -1, 2}, {1, 0, 4}};
    for (int k = 0; k < 3; k++) {
        params = steps[k];
        ema_update(DEVICE_CPU, ema, params.data(), 3);
        CHECK(std::vector<float>(ema.weights, ema.weights + 3) == expected[k]);
    }
    weight_average_free(DEVICE_CPU, ema);

    // through three training steps: the average of the parameters after each, in that order
    const Config c = tiny_config(1, false);
    const int B = 4;
    Model model;
    ModelOwner owner{model};
    model_build(model, c, DEVICE_CPU, B);
    init_model(model, 11, 2.0f);
    const float D = 0.75f;
    weight_average_start(model.ema, DEVICE_CPU, model.params_mem, model.num_params, D);
    std::vector<float> want = model_download(model, model.params_mem);
    Rng rng(2);
    std::vector<int> tokens;
    std::vector<float> y;
    random_batch(c, B, rng, tokens, y);
    for (int step = 0; step < 3; step++) {
        training_step(model, tokens.data(), y.data(), nullptr, 1e-2f, 0.0f, step);
        const std::vector<float> now = model_download(model, model.params_mem);
        for (size_t i = 0; i < want.size(); i++) want[i] = D * want[i] + (1.0f - D) * now[i];
    }
    CHECK(model_download(model, model.ema.weights) == want);
    CHECK(want != model_download(model, model.params_mem));
}

TEST_CASE("evaluate_run: the average's loss and metrics are a second model's whose parameters are the average") {
    check_evaluate_run(DEVICE_CPU, false);
}

TEST_CASE("--ema: the checkpoint holds the average, a resumed or killed and continued run ends bit-identical, and "
          "the log, metrics.json and the final table report ema_loss") {
    const std::string run = TINY + "--task maj3 --layers 2 --seed 4 --ema 0.9 --drop-path 0.3 --eval-every 3 "
                            "--checkpoint-every 3 ";
    // the straight 9 steps (ema_whole) are also the run the killed one must end as
    CommandResult whole{};
    StFile resumed = expect_resume_bit_exact(run, 4, 9, "ema", &whole);
    REQUIRE(resumed.find("ema.head.bias"));
    CHECK(resumed.find("ema.h.1.mlp.fc.weight"));
    CHECK(resumed.metadata["ema"] == "0.9");
    CHECK(whole.out.find("| ema_loss ") != std::string::npos);  // the final table
    // killed after step 7, continued from the checkpoint of step 6
    const std::string dir = TMP_PREFIX + "ema_";
    CommandResult killed = run_command("MASKPRIOR_KILL_AT=after-step:7 " + run + "--steps 9 --out " + dir + "killed");
    CHECK(killed.exit_code != 0);
    REQUIRE(run_command(run + "--steps 9 --continue --out " + dir + "killed").exit_code == 0);
    CHECK(run_record(dir + "killed") == run_record(dir + "whole"));
    const std::string log = read_file(dir + "whole/log.jsonl");
    CHECK(log.find("\"ema_loss\"") != std::string::npos);
    const nlohmann::json metrics = nlohmann::json::parse(read_file(dir + "whole/metrics.json"));
    CHECK(metrics.contains("ema_loss"));
    CHECK(metrics["ema_loss"].get<double>() != metrics["eval_loss"].get<double>());
    // without --ema: no ema tensors, no ema metrics
    REQUIRE(run_command(TINY + "--task maj3 --steps 3 --out " + dir + "off").exit_code == 0);
    CHECK(!safetensors_read(dir + "off/model.safetensors").find("ema.head.bias"));
    CHECK(read_file(dir + "off/log.jsonl").find("ema_") == std::string::npos);
}

TEST_CASE("--ema refuses a checkpoint without the average, in one line") {
    const std::string dir = TMP_PREFIX + "ema_refused";
    const std::string run = TINY + "--task maj3 --steps 3 --out " + dir + " ";
    REQUIRE(run_command(run).exit_code == 0);
    expect_error("--task maj3 --steps 5 --ema 0.9 --resume " + dir + "/model.safetensors",
                 "ema=0; this run asks for ema=0.9");
    // a file whose metadata says --ema but whose tensors lack it
    REQUIRE(run_command(run + "--ema 0.9").exit_code == 0);
    StFile file = safetensors_read(dir + "/model.safetensors");
    StFile stripped;
    stripped.metadata = file.metadata;
    for (const StTensor& t : file.tensors)
        if (t.name.rfind("ema.", 0) != 0) stripped.tensors.push_back(t);
    safetensors_write(dir + "/model.safetensors", stripped);
    expect_error("--task maj3 --steps 5 --ema 0.9 --resume " + dir + "/model.safetensors",
                 "has no moving average of the weights (no ema.* tensors) for --ema");
}
#endif

// ----------------------------------------------------------------------------
// the GPU

TEST_CASE("GPU moving average: the update matches the CPU's; evaluate_run puts the parameters back bit for bit, "
          "and with graphs" * doctest::skip(NO_GPU)) {
    Rng rng(8);
    const size_t n = 70001;  // 273 full blocks of 256 threads and a ragged 274th
    const std::vector<float> start = random_vector<float>(n, rng), params = random_vector<float>(n, rng);
    GpuBuffer on_gpu(start), params_on_gpu(params);
    WeightAverage cpu, gpu;
    weight_average_start(cpu, DEVICE_CPU, start.data(), n, 0.9999f);
    weight_average_start(gpu, DEVICE_GPU, on_gpu.ptr, n, 0.9999f);
    for (int k = 0; k < 3; k++) {
        ema_update(DEVICE_CPU, cpu, params.data(), n);
        ema_update(DEVICE_GPU, gpu, params_on_gpu.ptr, n);
    }
    std::vector<float> from_gpu(n);
    buffer_copy(from_gpu.data(), DEVICE_CPU, gpu.weights, DEVICE_GPU, n);
    expect_close("ema", from_gpu, std::vector<float>(cpu.weights, cpu.weights + n), ELEMENTWISE);
    weight_average_free(DEVICE_CPU, cpu);
    weight_average_free(DEVICE_GPU, gpu);
    for (bool graph : {false, true}) {
        CAPTURE(graph);
        check_evaluate_run(DEVICE_GPU, graph);
    }
}
