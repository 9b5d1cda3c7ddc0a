#include "parametrization.hpp"

#include <stdexcept>

#include <pinocchio/spatial.hpp>

namespace mcoe {
namespace {

// pi[4:10] order of the symmetric inertia: (xx, xy, yy, xz, yz, zz)
const int kRow[6] = {0, 0, 1, 0, 1, 2};
const int kCol[6] = {0, 1, 1, 2, 2, 2};
const int kCycI[3] = {1, 2, 0};
const int kCycJ[3] = {2, 0, 1};

Mat3 P() {
  Mat3 p;
  p << 0, 1, 1, 1, 0, 1, 1, 1, 0;
  return p;
}

void expEigvalPi(const Eigen::Ref<const Vec>& th, Eigen::Ref<Vec> out) {
  const double m = std::exp(th[0]);
  const Vec3 h = th.segment<3>(1);
  const Mat3 R = pinocchio::exp3(Vec3(th.segment<3>(4)));
  const Vec3 second = th.segment<3>(7).array().exp();
  const Vec3 principal = P() * second;
  const Mat3 inertia = R * principal.asDiagonal() * R.transpose() +
                       (h.squaredNorm() * Mat3::Identity() - h * h.transpose()) / m;
  out[0] = m;
  out.segment<3>(1) = h;
  for (int e = 0; e < 6; ++e) out[4 + e] = inertia(kRow[e], kCol[e]);
}

void expEigvalJacobian(const Eigen::Ref<const Vec>& th, Eigen::Ref<Mat> out) {
  const double m = std::exp(th[0]);
  const Vec3 h = th.segment<3>(1);
  const Vec3 w = th.segment<3>(4);
  const Mat3 R = pinocchio::exp3(w);
  const Vec3 second = th.segment<3>(7).array().exp();
  const Mat3 p = P();
  const Vec3 principal = p * second;
  const Mat3 parallel = (h.squaredNorm() * Mat3::Identity() - h * h.transpose()) / m;
  out.setZero();
  out(0, 0) = m;
  out.block<3, 3>(1, 1).setIdentity();
  Eigen::Matrix<double, 6, 3> dwv;
  for (int e = 0; e < 6; ++e) {
    const int r = kRow[e], c = kCol[e];
    out(4 + e, 0) = -parallel(r, c);
    for (int k = 0; k < 3; ++k) {
      const double diag = (r == c) ? 2.0 * h[k] : 0.0;
      out(4 + e, 1 + k) = (diag - (r == k ? h[c] : 0.0) - (c == k ? h[r] : 0.0)) / m;
      const int i = kCycI[k], j = kCycJ[k];
      dwv(e, k) = (R(r, i) * R(c, j) + R(r, j) * R(c, i)) * (principal[i] - principal[j]);
      double s = 0.0;
      for (int jj = 0; jj < 3; ++jj) s += R(r, jj) * R(c, jj) * p(jj, k) * second[k];
      out(4 + e, 7 + k) = s;
    }
  }
  Mat3 jexp;
  pinocchio::Jexp3<pinocchio::SETTO>(w, jexp);
  out.block<6, 3>(4, 4) = dwv * jexp;
}

}  // namespace

void Parametrization::add(const std::string& kind, int size, const Vec& offset) {
  ParamBlock b;
  if (kind == "exp-eigval") b.kind = ParamBlock::Kind::ExpEigval;
  else if (kind == "log-cholesky") b.kind = ParamBlock::Kind::LogCholesky;
  else if (kind == "plain") b.kind = ParamBlock::Kind::Plain;
  else if (kind == "euclidean") b.kind = ParamBlock::Kind::Euclidean;
  else if (kind == "positive") b.kind = ParamBlock::Kind::Positive;
  else throw std::invalid_argument("unknown parameter block kind " + kind);
  const bool body = b.kind == ParamBlock::Kind::ExpEigval || b.kind == ParamBlock::Kind::LogCholesky ||
                    b.kind == ParamBlock::Kind::Plain;
  if (body && size != 10) throw std::invalid_argument("an inertial body block has 10 parameters");
  if (offset.size() != 0 && offset.size() != size) throw std::invalid_argument("offset size must match the block");
  b.size = size;
  b.offset = offset;
  starts_.push_back(n_);
  blocks_.push_back(b);
  n_ += size;
}

void Parametrization::pi(const Vec& theta, Vec& out) const {
  out.resize(n_);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const ParamBlock& b = blocks_[i];
    const int s = starts_[i];
    auto t = theta.segment(s, b.size);
    auto o = out.segment(s, b.size);
    switch (b.kind) {
      case ParamBlock::Kind::ExpEigval: expEigvalPi(t, o); break;
      case ParamBlock::Kind::LogCholesky:
        o = pinocchio::LogCholeskyParametersTpl<double>(Vec(t)).toDynamicParameters();
        break;
      case ParamBlock::Kind::Plain:
      case ParamBlock::Kind::Euclidean: o = t; break;
      case ParamBlock::Kind::Positive: o = t.array().exp(); break;
    }
    if (b.offset.size()) o -= b.offset;
  }
}

void Parametrization::jacobian(const Vec& theta, Mat& out) const {
  out.setZero(n_, n_);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const ParamBlock& b = blocks_[i];
    const int s = starts_[i];
    auto t = theta.segment(s, b.size);
    auto o = out.block(s, s, b.size, b.size);
    switch (b.kind) {
      case ParamBlock::Kind::ExpEigval: expEigvalJacobian(t, o); break;
      case ParamBlock::Kind::LogCholesky:
        o = pinocchio::LogCholeskyParametersTpl<double>(Vec(t)).calculateJacobian();
        break;
      case ParamBlock::Kind::Plain:
      case ParamBlock::Kind::Euclidean: o.setIdentity(); break;
      case ParamBlock::Kind::Positive: o = t.array().exp().matrix().asDiagonal(); break;
    }
  }
}

}  // namespace mcoe
