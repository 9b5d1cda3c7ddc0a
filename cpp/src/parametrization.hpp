// theta -> pi maps of the estimated parameter blocks (mirror of mcoe_ros.multibody.inertia and mcoe_ros.ocp.problem):
// inertial manifolds of a 10-parameter body (exp-eigval, log-Cholesky, plain; optional offset: pi = psi(theta) -
// offset) and Euclidean / positive (exp) blocks. Forward maps and Jacobians only; the inverse stays in Python.
#pragma once

#include <string>
#include <vector>

#include "common.hpp"

namespace mcoe {

struct ParamBlock {
  enum class Kind { ExpEigval, LogCholesky, Plain, Euclidean, Positive };
  Kind kind;
  int size;
  Vec offset;  // subtracted from the block's pi (body kinds); empty = none
};

class Parametrization {
 public:
  void add(const std::string& kind, int size, const Vec& offset);
  int size() const { return n_; }
  void pi(const Vec& theta, Vec& out) const;
  void jacobian(const Vec& theta, Mat& out) const;  // (n, n), block diagonal

 private:
  std::vector<ParamBlock> blocks_;
  std::vector<int> starts_;
  int n_ = 0;
};

}  // namespace mcoe
