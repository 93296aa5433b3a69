#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "chimera/core/config.hpp"
#include "chimera/core/config_checks.hpp"
#include "chimera/core/error.hpp"
#include "input_error.hpp"

namespace chimera {

TEST(Config, ParsesSectionsAndKeepsDefaults) {
  const auto c = Config::from_toml(R"(
[model]
n_layer = 6
n_embd = 384
[parallel]
scheme = "1f1b"
partition = [2, 2, 1, 1]
recompute = true
[data]
train = "a.h5"
val = ["v0.h5", "v1.h5"]
[train]
lr = 3e-4
min_lr = 0
)");
  EXPECT_EQ(c.model.n_layer, 6);
  EXPECT_EQ(c.model.n_embd, 384);
  EXPECT_EQ(c.model.n_head, 4);  // default
  EXPECT_EQ(c.parallel.scheme, "1f1b");
  EXPECT_EQ(c.parallel.partition, (std::vector<int>{2, 2, 1, 1}));
  EXPECT_TRUE(c.parallel.recompute);
  EXPECT_EQ(c.data.train, (std::vector<std::string>{"a.h5"}));
  EXPECT_EQ(c.data.val.size(), 2U);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.train.min_lr, 0.0);  // an integer is accepted for a float key
}

TEST(Config, OverridesEveryKind) {
  Config c;
  c.set("model.n_layer=12");
  c.set("train.lr=1e-3");
  c.set("parallel.recompute=true");
  c.set("parallel.scheme=gpipe");
  c.set("parallel.partition=3,3,3,3");
  c.set("data.train=[x.h5, y.h5]");
  c.set("train.seed=123456789012");
  EXPECT_EQ(c.model.n_layer, 12);
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
  EXPECT_TRUE(c.parallel.recompute);
  EXPECT_EQ(c.parallel.scheme, "gpipe");
  EXPECT_EQ(c.parallel.partition, (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(c.data.train, (std::vector<std::string>{"x.h5", "y.h5"}));
  EXPECT_EQ(c.train.seed, 123456789012LL);
}

TEST(Config, RoundTripsThroughTomlText) {
  Config c;
  c.set("model.n_layer=7");
  c.set("train.lr=0.1");
  c.set("data.val=a.h5,b\"q.h5");
  c.set("parallel.virtual=2");
  const Config back = Config::from_toml(c.to_toml());
  EXPECT_EQ(back.to_toml(), c.to_toml());
  EXPECT_EQ(back.hash(), c.hash());
  EXPECT_DOUBLE_EQ(back.train.lr, 0.1);
  EXPECT_EQ(back.parallel.virtual_stages, 2);
  EXPECT_EQ(back.data.val[1], "b\"q.h5");
}

TEST(Config, DifferencesNameTheKeysOfOneSectionWithBothValues) {
  Config a, b;
  b.set("train.lr=0.002");
  b.set("train.beta2=0.99");
  b.set("model.n_embd=48");
  const auto train = Config::differences(a, b, "train");
  ASSERT_EQ(train.size(), 2U);
  EXPECT_EQ(train[0].key, "train.lr");
  EXPECT_EQ(train[0].a, "0.0006");
  EXPECT_EQ(train[0].b, "0.002");
  EXPECT_EQ(train[1].key, "train.beta2");
  const auto model = Config::differences(a, b, "model");
  ASSERT_EQ(model.size(), 1U);
  EXPECT_EQ(model[0].key, "model.n_embd");
  EXPECT_TRUE(Config::differences(a, a, "train").empty());
}

TEST(Config, HashChangesWithAnyKey) {
  Config a, b;
  b.set("train.beta2=0.999");
  EXPECT_NE(a.hash(), b.hash());
}

TEST(Config, UnknownKeySuggestsTheNearOne) {
  Config c;
  try {
    c.set("model.n_layers=4");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'model.n_layer'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Config::from_toml("[modle]\nn_layer = 3\n"), InputError);
  EXPECT_THROW(Config::from_toml("[model]\nwidth = 3\n"), InputError);
}

TEST(Config, WrongTypesAreInputErrors) {
  Config c;
  EXPECT_THROW(c.set("model.n_layer=four"), InputError);
  EXPECT_THROW(c.set("model.n_layer=4.5"), InputError);
  EXPECT_THROW(c.set("parallel.recompute=maybe"), InputError);
  EXPECT_THROW(c.set("model.n_layer"), InputError);
  EXPECT_THROW(Config::from_toml("[model]\nn_layer = \"4\"\n"), InputError);
  EXPECT_THROW(Config::from_toml("[model]\nn_layer = 99999999999\n"), InputError);
  EXPECT_THROW(Config::from_toml("[model\n"), InputError);
  EXPECT_THROW(Config::from_file("/nonexistent/run.toml"), InputError);
}

TEST(Config, WordKeysAreReadOnceAndWrittenAsTheyAreSpelled) {
  auto c = Config::from_toml(R"(
[runtime]
compute = "emulate"
wait = "poll"
messages = "host"
allreduce = "nccl"
[train]
on_nonfinite = "skip"
)");
  EXPECT_EQ(c.runtime.compute, ComputeMode::Emulate);
  EXPECT_EQ(c.runtime.wait, WaitMode::Poll);
  EXPECT_EQ(c.runtime.backend, BackendKind::Cpu);  // default
  EXPECT_EQ(c.runtime.messages, MessagesMode::Host);
  EXPECT_EQ(c.runtime.allreduce, AllreduceMode::Nccl);
  EXPECT_EQ(c.train.on_nonfinite, NonfinitePolicy::Skip);
  c.set("checkpoint.on_save_error=warn");
  c.set("runtime.backend='cuda'");
  EXPECT_EQ(c.checkpoint.on_save_error, SaveErrorPolicy::Warn);
  EXPECT_EQ(c.runtime.backend, BackendKind::Cuda);
  const std::string text = c.to_toml();
  EXPECT_NE(text.find("compute = \"emulate\""), std::string::npos) << text;
  EXPECT_NE(text.find("on_save_error = \"warn\""), std::string::npos) << text;
  EXPECT_EQ(Config::from_toml(text).to_toml(), text);
  EXPECT_EQ(to_string(AllreduceMode::Mpi), "mpi");
  EXPECT_EQ(parse_enum<MessagesMode>("device"), MessagesMode::Device);
}

TEST(Config, AWordNoKeyTakesNamesTheKeyAndTheWords) {
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Config c;
  EXPECT_EQ(message([&] { c.set("runtime.compute=fake"); }),
            "runtime.compute = 'fake': expected 'real' or 'emulate'");
  EXPECT_EQ(message([&] { c.set("runtime.wait=spin"); }),
            "runtime.wait = 'spin': expected 'doorbell' or 'poll'");
  EXPECT_EQ(message([&] { c.set("runtime.backend=tpu"); }),
            "runtime.backend = 'tpu': expected 'cpu' or 'cuda'");
  EXPECT_EQ(message([&] { c.set("runtime.messages=gpu"); }),
            "runtime.messages = 'gpu': expected auto, device or host");
  EXPECT_EQ(message([&] { c.set("runtime.allreduce=gloo"); }),
            "runtime.allreduce = 'gloo': expected auto, nccl or mpi");
  EXPECT_EQ(message([] { Config::from_toml("[train]\non_nonfinite = \"ignore\"\n"); }),
            "train.on_nonfinite = 'ignore': use stop or skip");
  EXPECT_EQ(message([] { Config::from_toml("[checkpoint]\non_save_error = \"retry\"\n"); }),
            "checkpoint.on_save_error = 'retry': use stop or warn");
  EXPECT_THROW(Config::from_toml("[runtime]\ncompute = 1\n"), InputError);  // not a string
}

TEST(Config, ClosestMatch) {
  EXPECT_EQ(closest_match("gpip", {"gpipe", "1f1b", "chimera"}), "gpipe");
  EXPECT_EQ(closest_match("zzzzzzzz", {"gpipe", "1f1b"}), "");
}

using testing::input_error;

TEST(Config, NonFiniteNumbersAreRefusedAsTheKeysAreRead) {
  for (const char* value : {"nan", "inf", "-inf"}) {
    SCOPED_TRACE(value);
    Config c;
    const std::string set = std::string("--set train.lr=") + value;
    EXPECT_NE(input_error([&] { c.set(set.substr(6)); }).find("not a finite number"),
              std::string::npos);
    const std::string toml = std::string("[train]\nlr = ") + value + "\n";
    const std::string msg = input_error([&] { Config::from_toml(toml, "run.toml"); });
    EXPECT_NE(msg.find("run.toml: config key 'train.lr'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("expected a finite number"), std::string::npos) << msg;
  }
  EXPECT_THROW(Config::from_toml("[train]\ngrad_clip = +nan\n"), InputError);
  Config c;
  EXPECT_THROW(c.set("checkpoint.save_timeout_s=inf"), InputError);
  c.set("train.lr=1e-3");  // finite values still read
  EXPECT_DOUBLE_EQ(c.train.lr, 1e-3);
}

TEST(Config, ADirectoryIsNotAConfigFile) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string msg = input_error([&] { Config::from_file(dir); });
  EXPECT_NE(msg.find("is a directory"), std::string::npos) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
}

TEST(ConfigChecks, DefaultsPass) {
  EXPECT_NO_THROW(check_config(Config{}));
}

TEST(ConfigChecks, RefuseValuesNoRunCanUseNamingKeyAndFlag) {
  struct Case {
    const char* set;
    const char* needle;
  };
  for (const Case& k : {Case{"train.eval_every=-1", "train.eval_every (--eval-every) = -1"},
                        Case{"checkpoint.every=-2", "checkpoint.every (--save-every) = -2"},
                        Case{"train.grad_clip=-0.5", "train.grad_clip = -0.5"}}) {
    SCOPED_TRACE(k.set);
    Config c;
    c.set(k.set);
    const std::string msg = input_error([&] { check_config(c); });
    EXPECT_NE(msg.find(k.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find("must be >= 0"), std::string::npos) << msg;
  }
}

TEST(ConfigChecks, ValidationNeedsAtLeastOneBatchOnlyWhenItRuns) {
  Config c;
  c.train.eval_batches = 0;
  EXPECT_NO_THROW(check_config(c));  // no validation: the key is unused
  c.train.eval_every = 5;
  const std::string msg = input_error([&] { check_config(c); });
  EXPECT_NE(msg.find("train.eval_batches = 0: must be at least 1"), std::string::npos) << msg;
  c.train.eval_batches = 1;
  EXPECT_NO_THROW(check_config(c));
}

TEST(ConfigChecks, OptimizerValuesAreInputErrors) {
  TrainConfig t;
  EXPECT_NO_THROW(check_optimizer_config(t));
  for (const char* set : {"train.min_lr=1.0", "train.lr=0", "train.steps=0", "train.beta2=1.0",
                          "train.eps=0", "train.weight_decay=-1", "train.warmup_steps=-1"}) {
    SCOPED_TRACE(set);
    Config c;
    c.set(set);
    const std::string key = std::string(set).substr(0, std::string(set).find('='));
    const std::string msg = input_error([&] { check_config(c); });
    EXPECT_NE(msg.find(key), std::string::npos) << msg;
  }
}

// The rules of the trainer's setup, the run plan's and the checkpoint directory's, in one place.
TEST(ConfigChecks, EveryRuleOfTheSetupIsHere) {
  struct Case {
    std::vector<const char*> sets;
    const char* needle;
  };
  for (const Case& k :
       {Case{{"parallel.micro_batch_size=0"}, "parallel.micro_batch_size = 0: must be at least 1"},
        Case{{"log.every=0"}, "log.every = 0: must be at least 1"},
        Case{{"runtime.compute=emulate"}, "--compute emulate needs the op costs"},
        Case{{"checkpoint.dir=x", "checkpoint.keep=0"}, "checkpoint.keep = 0 must be at least 1"},
        Case{{"log.sample_tokens=-1"}, "log.sample_tokens = -1 must be >= 0"},
        Case{{"log.sample_tokens=4"}, "set train.eval_every (--eval-every K) too"},
        Case{{"train.max_skipped_steps=0"}, "train.max_skipped_steps = 0: must be at least 1"},
        Case{{"checkpoint.save_timeout_s=-1"}, "checkpoint.save_timeout_s = -1"},
        Case{{"runtime.watchdog_s=-2"}, "runtime.watchdog_s = -2"}}) {
    SCOPED_TRACE(k.needle);
    Config c;
    for (const char* s : k.sets) c.set(s);
    const std::string msg = input_error([&] { check_config(c); });
    EXPECT_NE(msg.find(k.needle), std::string::npos) << msg;
  }
}

TEST(ConfigChecks, ZeroKeepsItsMeaningOfOff) {
  Config c;
  c.train.eval_every = 0;
  c.checkpoint.every = 0;
  c.train.grad_clip = 0.0;
  EXPECT_NO_THROW(check_config(c));
}

}  // namespace chimera
