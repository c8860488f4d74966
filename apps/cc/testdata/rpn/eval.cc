#include <cmath>
#include <stdexcept>

#include "token.h"

namespace rpn {

double Evaluate(const std::vector<Token>& postfix) {
  std::vector<double> stack;
  auto pop = [&stack] {
    if (stack.empty()) throw std::invalid_argument("missing operand");
    double v = stack.back();
    stack.pop_back();
    return v;
  };
  for (const Token& t : postfix) {
    if (const auto* n = std::get_if<Number>(&t)) {
      stack.push_back(n->value);
      continue;
    }
    const Operator& op = std::get<Operator>(t);
    if (op.unary) {
      stack.push_back(-pop());
      continue;
    }
    double b = pop(), a = pop();
    switch (op.symbol) {
      case '+': stack.push_back(a + b); break;
      case '-': stack.push_back(a - b); break;
      case '*': stack.push_back(a * b); break;
      case '/': stack.push_back(a / b); break;
      case '^': stack.push_back(std::pow(a, b)); break;
    }
  }
  if (stack.size() != 1) throw std::invalid_argument("malformed expression");
  return stack.back();
}

}  // namespace rpn
