#include <iostream>
#include <stdexcept>

#include "token.h"

int main(int argc, char** argv) {
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    try {
      std::cout << rpn::Evaluate(rpn::ToPostfix(rpn::Lex(argv[i]))) << "\n";
    } catch (const std::exception& e) {
      std::cerr << "rpn: " << argv[i] << ": " << e.what() << "\n";
      status = 1;
    }
  }
  return status;
}
