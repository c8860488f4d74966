#include <cctype>
#include <stdexcept>

#include "token.h"

namespace rpn {

std::vector<Token> Lex(const std::string& text) {
  std::vector<Token> out;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t used = 0;
      out.push_back(Number{std::stod(text.substr(i), &used)});
      i += used;
    } else if (c == '(' || c == ')') {
      out.push_back(Paren{c == '('});
      ++i;
    } else if (std::string("+-*/^").find(c) != std::string::npos) {
      // A minus is unary at the start, after an operator or after an opening parenthesis.
      bool unary = c == '-' && (out.empty() || std::holds_alternative<Operator>(out.back()) ||
                                (std::holds_alternative<Paren>(out.back()) &&
                                 std::get<Paren>(out.back()).open));
      out.push_back(Operator{c, unary});
      ++i;
    } else {
      throw std::invalid_argument(std::string("unexpected '") + c + "'");
    }
  }
  return out;
}

}  // namespace rpn
