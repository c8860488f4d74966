#pragma once
#include <string>
#include <variant>
#include <vector>

namespace rpn {

struct Number { double value; };
struct Operator { char symbol; bool unary = false; };
struct Paren { bool open; };
using Token = std::variant<Number, Operator, Paren>;

// Splits `text` into tokens; throws std::invalid_argument on a character it does not know.
std::vector<Token> Lex(const std::string& text);
// Infix to reverse Polish (shunting-yard); throws on unbalanced parentheses.
std::vector<Token> ToPostfix(const std::vector<Token>& infix);
// Evaluates a postfix expression; throws on a malformed one.
double Evaluate(const std::vector<Token>& postfix);

}  // namespace rpn
