// A small seeded mutation fuzzer for the unit suite (and so for the sanitizer
// build of scripts/test). Each target starts from valid inputs (seeds), applies a
// few random mutations per case (byte flips, inserts, deletes, copies, tokens from
// a dictionary, numbers at the edges of their types, splices of two seeds) and
// calls the reader. The reader may accept the input or refuse it with a one-line
// tpusim::Error; any other exception is a finding, and ASan/UBSan turn memory and
// arithmetic errors into findings. A stated share of the inputs must get past the
// reader's first check, or the fuzzer would only test that check. Seeds are fixed, so every run checks the same cases
// and a finding reproduces; TPUSIM_FUZZ_CASES raises the case count for a longer local run.
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
    for (const char* edge : {"0", "-1", "1", "2147483647", "2147483648", "-2147483649", "4294967296",
                             "9223372036854775807", "-9223372036854775808", "18446744073709551615", "1e308", "-1e308",
                             "1e-320", ".nan", ".inf", "-.inf", "0x7fffffff", "1e9", "99999999999999999999"}) {
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

// A target's first check: the one its readers make before any other (YAML syntax,
// the .npy magic, a header's counts). A fuzzer whose mutations mostly stop there
// never reaches the code behind it, so a stated share of inputs must get past it:
// be accepted, or be refused by a deeper check.
struct FirstCheck {
  std::string what;                                 // for the failure message
  std::function<bool(const std::string&)> refused;  // whether an Error's message is its refusal
  double min_past_share;                            // of all cases, in [0, 1]
  bool one_line = true;                             // refusals must be one line (as tpusim prints them)
};

// Why an Error is not a clean refusal (one non-empty line of text), or "".
inline std::string Unclean(const std::string& message) {
  if (message.empty()) return "an empty message";
  if (message.find('\n') != std::string::npos) return "a message of several lines";
  return "";
}

// Runs `target` on `cases` mutated inputs. Each must be accepted or refused with a
// tpusim::Error of one line; anything else fails the test, naming the case and its
// input (at most a few findings). At least first.min_past_share of the cases must
// get past `first`. With TPUSIM_FUZZ_TRACE set, every input is printed before it
// runs (to find a crash).
inline void Fuzz(Mutator& mutator, int cases, const FirstCheck& first,
                 const std::function<void(const std::string&)>& target) {
  int findings = 0, accepted = 0, refused_first = 0, refused_deeper = 0;
  const bool trace = std::getenv("TPUSIM_FUZZ_TRACE") != nullptr;
  const int total = FuzzCases(cases);
  auto finding = [&](int i, const std::string& what, const std::string& input) {
    ++findings;
    ADD_FAILURE() << "case " << i << ": " << what << "\ninput: \"" << Escaped(input) << "\"";
  };
  for (int i = 0; i < total && findings < 3; ++i) {
    std::string input = mutator.Next();
    if (trace) fmt::print(stderr, "case {}: \"{}\"\n", i, Escaped(input));
    try {
      target(input);
      ++accepted;
    } catch (const Error& e) {
      ++(first.refused(e.what()) ? refused_first : refused_deeper);
      const std::string unclean = first.one_line ? Unclean(e.what()) : "";
      if (!unclean.empty()) finding(i, "tpusim::Error with " + unclean + ": " + e.what(), input);
    } catch (const std::exception& e) {
      finding(i, std::string(typeid(e).name()) + ": " + e.what(), input);
    } catch (...) {
      finding(i, "an exception of unknown type", input);
    }
  }
  const int ran = accepted + refused_first + refused_deeper;
  fmt::print("{} inputs accepted, {} refused by {}, {} refused deeper\n", accepted, refused_first, first.what,
             refused_deeper);
  EXPECT_GE(accepted + refused_deeper, first.min_past_share * ran)
      << ran - refused_first << " of " << ran << " inputs got past " << first.what;
}

}  // namespace tpusim::testing
