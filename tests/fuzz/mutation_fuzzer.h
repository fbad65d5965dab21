// A small seeded mutation fuzzer for the unit suite (and so for the sanitizer
// build of scripts/test). Each target starts from valid inputs (seeds), applies a
// few random mutations per case (byte flips, inserts, deletes, copies, tokens from
// a dictionary, numbers at the edges of their types, splices of two seeds) and
// calls the reader. The reader may accept the input or throw tpusim::Error; any
// other exception is a finding, and ASan/UBSan turn memory and arithmetic errors
// into findings. Seeds are fixed, so every run checks the same cases and a finding
// reproduces; TPUSIM_FUZZ_CASES raises the case count for a longer local run.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <typeinfo>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "base/error.h"

namespace tpusim::testing {

class Mutator {
 public:
  Mutator(std::vector<std::string> seeds, std::vector<std::string> dictionary, uint64_t seed)
      : seeds_(std::move(seeds)), dictionary_(std::move(dictionary)), rng_(seed) {
    for (const char* edge : {"0", "-1", "1", "2147483647", "2147483648", "-2147483649",
                             "4294967296", "9223372036854775807", "-9223372036854775808",
                             "18446744073709551615", "1e308", "-1e308", "1e-320", ".nan", ".inf",
                             "-.inf", "0x7fffffff", "1e9", "99999999999999999999"}) {
      dictionary_.push_back(edge);
    }
  }

  // A seed with 1 to 4 mutations applied.
  std::string Next() {
    std::string text = seeds_[Below(seeds_.size())];
    int mutations = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < mutations; ++i) Mutate(text);
    return text;
  }

  size_t Below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng_() % n); }

 private:
  void Mutate(std::string& text) {
    size_t at = Below(text.size() + 1);
    switch (Below(8)) {
      case 0:  // flip a bit
        if (!text.empty()) text[at % text.size()] ^= static_cast<char>(1 << Below(8));
        break;
      case 1:  // a random byte
        text.insert(at, 1, static_cast<char>(Below(256)));
        break;
      case 2:  // delete a range
        text.erase(at, 1 + Below(16));
        break;
      case 3: {  // copy a range elsewhere
        size_t from = Below(text.size() + 1);
        std::string piece = text.substr(from, 1 + Below(32));
        text.insert(Below(text.size() + 1), piece);
        break;
      }
      case 4:  // a dictionary token
      case 5:
        text.insert(at, dictionary_[Below(dictionary_.size())]);
        break;
      case 6: {  // replace the number at a random digit by an edge value
        size_t digit = text.find_first_of("0123456789", at);
        if (digit == std::string::npos) break;
        size_t end = text.find_first_not_of("0123456789.e-", digit);
        text.replace(digit, end == std::string::npos ? std::string::npos : end - digit,
                     dictionary_[dictionary_.size() - 1 - Below(19)]);
        break;
      }
      default: {  // splice with another seed
        const std::string& other = seeds_[Below(seeds_.size())];
        text = text.substr(0, at) + other.substr(std::min(at, other.size()));
        break;
      }
    }
  }

  std::vector<std::string> seeds_;
  std::vector<std::string> dictionary_;
  std::mt19937_64 rng_;
};

// Cases per target: `cases`, or TPUSIM_FUZZ_CASES when set.
inline int FuzzCases(int cases) {
  const char* env = std::getenv("TPUSIM_FUZZ_CASES");
  return env ? std::atoi(env) : cases;
}

// The input as a C string literal, for a failure message that reproduces it.
inline std::string Escaped(const std::string& input) {
  std::string out;
  for (unsigned char c : input) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// Runs `target` on `cases` mutated inputs; anything but success or tpusim::Error
// fails the test, naming the case and its input (at most a few findings). With
// TPUSIM_FUZZ_TRACE set, every input is printed before it runs (to find a crash).
inline void Fuzz(Mutator& mutator, int cases, const std::function<void(const std::string&)>& target) {
  int findings = 0, accepted = 0, refused = 0;
  const bool trace = std::getenv("TPUSIM_FUZZ_TRACE") != nullptr;
  for (int i = 0; i < FuzzCases(cases) && findings < 3; ++i) {
    std::string input = mutator.Next();
    if (trace) fmt::print(stderr, "case {}: \"{}\"\n", i, Escaped(input));
    try {
      target(input);
      ++accepted;
    } catch (const Error&) {
      ++refused;
    } catch (const std::exception& e) {
      ++findings;
      ADD_FAILURE() << "case " << i << ": " << typeid(e).name() << ": " << e.what() << "\ninput: \""
                    << Escaped(input) << "\"";
    } catch (...) {
      ++findings;
      ADD_FAILURE() << "case " << i << ": an exception of unknown type\ninput: \"" << Escaped(input) << "\"";
    }
  }
  fmt::print("{} inputs accepted, {} refused with tpusim::Error\n", accepted, refused);
}

}  // namespace tpusim::testing
