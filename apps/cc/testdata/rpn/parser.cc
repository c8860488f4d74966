#include <map>
#include <stdexcept>

#include "token.h"

namespace rpn {
namespace {

int Precedence(const Operator& op) {
  static const std::map<char, int> kLevels{{'+', 1}, {'-', 1}, {'*', 2}, {'/', 2}, {'^', 3}};
  return op.unary ? 4 : kLevels.at(op.symbol);
}

bool RightAssociative(const Operator& op) { return op.unary || op.symbol == '^'; }

}  // namespace

std::vector<Token> ToPostfix(const std::vector<Token>& infix) {
  std::vector<Token> out, stack;
  for (const Token& t : infix) {
    if (std::holds_alternative<Number>(t)) {
      out.push_back(t);
    } else if (const auto* op = std::get_if<Operator>(&t)) {
      while (!stack.empty() && std::holds_alternative<Operator>(stack.back())) {
        const Operator& top = std::get<Operator>(stack.back());
        if (Precedence(top) > Precedence(*op) ||
            (Precedence(top) == Precedence(*op) && !RightAssociative(*op))) {
          out.push_back(top);
          stack.pop_back();
        } else {
          break;
        }
      }
      stack.push_back(t);
    } else if (std::get<Paren>(t).open) {
      stack.push_back(t);
    } else {
      while (!stack.empty() && !std::holds_alternative<Paren>(stack.back())) {
        out.push_back(stack.back());
        stack.pop_back();
      }
      if (stack.empty()) throw std::invalid_argument("unbalanced ')'");
      stack.pop_back();
    }
  }
  while (!stack.empty()) {
    if (std::holds_alternative<Paren>(stack.back())) throw std::invalid_argument("unbalanced '('");
    out.push_back(stack.back());
    stack.pop_back();
  }
  return out;
}

}  // namespace rpn
