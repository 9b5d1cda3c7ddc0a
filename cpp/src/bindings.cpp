// Python bindings of the compiled core: mcoe_ros._mcoe (used through mcoe_ros.multibody.compiled).
#include <pybind11/eigen.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <pinocchio/serialization.hpp>

#include "contact_forces.hpp"
#include "interval.hpp"
#include "parametrization.hpp"
#include "solver.hpp"

namespace py = pybind11;
using namespace mcoe;

namespace {

struct Robot {
  PinModel model;
};

std::shared_ptr<Robot> robotFromString(const std::string& text) {
  auto r = std::make_shared<Robot>();
  pinocchio::serialization::loadFromString(r->model, text);
  return r;
}

MeasurementSpec::Kind kindOf(const std::string& name) {
  using K = MeasurementSpec::Kind;
  if (name == "joint_position") return K::JointPosition;
  if (name == "joint_velocity") return K::JointVelocity;
  if (name == "gyro") return K::Gyro;
  if (name == "orientation") return K::Orientation;
  if (name == "specific_force") return K::SpecificForce;
  if (name == "contact_velocity") return K::ContactVelocity;
  if (name == "base_height") return K::BaseHeight;
  throw std::invalid_argument("unknown measurement kind " + name);
}

py::dict resultDict(const Result& r) {
  py::list log;
  for (const auto& l : r.log)
    log.append(py::make_tuple(l.iteration, l.cost, l.merit, l.gap, l.step, l.reg, l.stop, l.time, l.arrival));
  py::dict d;
  d["converged"] = r.converged;
  d["iterations"] = r.iterations;
  d["cost"] = r.cost;
  d["gap"] = r.gap;
  d["status"] = r.status;
  d["log"] = log;
  d["arrival_hessian"] = r.arrival_hessian;
  return d;
}

using ModelPtr = std::shared_ptr<const IntervalModel>;

std::vector<ModelPtr> asModels(const std::vector<std::shared_ptr<IntervalModel>>& ms) {
  return std::vector<ModelPtr>(ms.begin(), ms.end());
}

}  // namespace

PYBIND11_MODULE(_mcoe, m) {
  m.doc() = "Compiled hot path of mcoe_ros: multibody interval models and the multiple-shooting OE solver.";
  // a numerical failure (a factorisation, a non-finite step) is a numpy.linalg.LinAlgError, as in the Python reference
  py::register_exception<FactorizationError>(m, "FactorizationError",
                                             py::module_::import("numpy.linalg").attr("LinAlgError"));

  py::class_<Robot, std::shared_ptr<Robot>>(m, "Robot")
      .def(py::init(&robotFromString), py::arg("model_string"),
           "A Pinocchio model from pin.Model.saveToString() (exact text archive).")
      .def_property_readonly("nq", [](const Robot& r) { return r.model.nq; })
      .def_property_readonly("nv", [](const Robot& r) { return r.model.nv; });

  py::class_<ContactForces>(m, "ContactForces")
      .def(py::init([](const Robot& robot, const std::vector<int>& feet, const std::vector<std::vector<int>>& legs) {
             return std::make_unique<ContactForces>(robot.model, feet, legs);
           }),
           py::arg("robot"), py::arg("feet"), py::arg("legs"))
      .def(
          "compute",
          [](ContactForces& c, const Vec& q, const Vec& v, const Vec& a, const Vec& tau, const Vec& armature) {
            return RowMat(c.compute(q, v, a, tau, armature));
          },
          py::arg("q"), py::arg("v"), py::arg("a"), py::arg("tau"), py::arg("armature"),
          "Ground reaction forces (nfeet, 3), world axes, N (ContactDetector.forces_from_state).")
      .def(
          "momentum",
          [](ContactForces& c, const Vec& q, const Vec& v, const Vec& tau, const Vec& armature,
             const Vec& specific_force) {
            auto pr = c.momentum(q, v, tau, armature, specific_force);
            return py::make_tuple(Vec(pr.first), Vec(pr.second));
          },
          py::arg("q"), py::arg("v"), py::arg("tau"), py::arg("armature"), py::arg("specific_force"),
          "The momentum observer's (reduced momentum p, right-hand side), leg rows (3 nfeet,) "
          "(ContactDetector._momentum); keeps the legs' J^T.")
      .def(
          "observe",
          [](ContactForces& c, const Vec& q, const Vec& v, const Vec& tau, const Vec& armature,
             const Vec& specific_force, double dt, double g, Eigen::Ref<Vec> p_prev, Eigen::Ref<Vec> rhs_prev,
             Eigen::Ref<Vec> r) {
            return RowMat(c.observe(q, v, tau, armature, specific_force, dt, g, p_prev, rhs_prev, r));
          },
          py::arg("q"), py::arg("v"), py::arg("tau"), py::arg("armature"), py::arg("specific_force"), py::arg("dt"),
          py::arg("g"), py::arg("p_prev").noconvert(), py::arg("rhs_prev").noconvert(), py::arg("r").noconvert(),
          "One momentum-observer step (ContactDetector._observe): forces (nfeet, 3); p_prev, rhs_prev and r "
          "(float64 arrays, 3 nfeet) updated in place.")
      .def(
          "solve", [](ContactForces& c, const Vec& leg_torques) { return RowMat(c.solve(leg_torques)); },
          py::arg("leg_torques"), "Forces (nfeet, 3) from J^T f on the leg rows (3 nfeet,) with the kept J^T.")
      .def_property_readonly(
          "jacobians_t", [](const ContactForces& c) { return RowMat(c.jacobiansT()); },
          "The legs' J^T of the last call, stacked per foot (3 nfeet, 3).");

  py::class_<Parametrization>(m, "Parametrization")
      .def(py::init<>())
      .def("add", &Parametrization::add, py::arg("kind"), py::arg("size"), py::arg("offset") = Vec())
      .def_property_readonly("size", &Parametrization::size)
      .def("pi", [](const Parametrization& p, const Vec& th) { Vec out; p.pi(th, out); return out; })
      .def("jacobian", [](const Parametrization& p, const Vec& th) { Mat out; p.jacobian(th, out); return out; });

  py::class_<IntervalData>(m, "IntervalData")
      .def_readwrite("u", &IntervalData::u)
      .def_readwrite("z", &IntervalData::z)
      .def_readonly("xnext", &IntervalData::xnext)
      .def_readonly("r", &IntervalData::r)
      .def_readonly("Fx", &IntervalData::Fx)
      .def_readonly("Fp", &IntervalData::Fp)
      .def_readonly("Rx", &IntervalData::Rx)
      .def_readonly("Rp", &IntervalData::Rp)
      .def_readonly("Rw", &IntervalData::Rw)
      .def_readonly("a", &IntervalData::a)
      .def_readonly("lam", &IntervalData::lam)
      .def_readonly("da_dtau", &IntervalData::da_dtau)
      .def_property_readonly(
          "prox_iterations", [](const IntervalData& d) { return d.settings.iter; },
          "Proximal iterations of the last constraintDynamics (contact forces; 0 without contacts).")
      .def_property_readonly("pinocchio_datas", &IntervalData::pinocchioDatas,
                             "number of allocated pinocchio::Data this data holds")
      .def("reset", &IntervalData::reset, py::arg("model"),
           "Every member but the pinocchio::Data to the model's fresh values (not a fresh data across contact sets).");

  py::class_<IntervalModel, std::shared_ptr<IntervalModel>>(m, "IntervalModel")
      .def(py::init([](const Robot& robot, const std::vector<int>& contacts, const std::vector<int>& impulse,
                       double dt, double mu, double accuracy, int max_iter, int payload_joint, const Mat& A,
                       const Vec& nominal_pi, const Mat& groups, double eps, bool gyro_bias, bool acc_bias,
                       const std::vector<int>& damped, double kd, const std::vector<int>& points,
                       bool rolling_contacts) {
             return std::make_shared<IntervalModel>(robot.model, contacts, impulse, dt, mu, accuracy, max_iter,
                                                    payload_joint, A, nominal_pi, groups, eps, gyro_bias, acc_bias,
                                                    damped, kd, points, rolling_contacts);
           }),
           py::arg("robot"), py::arg("contact_frames"), py::arg("impulse_frames"), py::arg("dt"), py::arg("mu"),
           py::arg("accuracy"), py::arg("max_iter"), py::arg("payload_joint"), py::arg("payload_to_joint"),
           py::arg("nominal_pi"), py::arg("actuator_groups"), py::arg("coulomb_smoothing"), py::arg("gyro_bias"),
           py::arg("acc_bias"), py::arg("damped_frames") = std::vector<int>{}, py::arg("kd") = 0.0,
           py::arg("point_frames") = std::vector<int>{}, py::arg("rolling_contacts") = true,
           "point_frames: rolling feet, all foot frame ids in order (empty = off): u = [tau (nj); p_k (3) per foot], "
           "the contact points in the foot frames (m); rolling_contacts: the contacts at those points (false: at the "
           "foot frames, the points serve the contact velocity measurements only)")
      .def("add_measurement",
           [](IntervalModel& self, const std::string& kind, int frame_id, const Mat& W, int bias_start,
              bool quat_wxyz, bool realised, int point_index) {
             MeasurementSpec s;
             s.kind = kindOf(kind);
             s.frame_id = frame_id;
             s.W = W;
             s.bias_start = bias_start;
             s.quat_wxyz = quat_wxyz;
             s.realised = realised;
             s.point_index = point_index;
             self.addMeasurement(s);
           },
           py::arg("kind"), py::arg("frame_id"), py::arg("W"), py::arg("bias_start") = -1,
           py::arg("quat_wxyz") = true, py::arg("realised") = false, py::arg("point_index") = -1)
      .def_readonly("noise_coupled", &IntervalModel::noise_coupled)
      .def_readonly("npi", &IntervalModel::npi)
      .def_readonly("nz", &IntervalModel::nz)
      .def_readonly("nr", &IntervalModel::nr)
      .def_readonly("nu", &IntervalModel::nu)
      .def("create_data", [](const IntervalModel& self) { return self.createData(); })
      .def("calc", &IntervalModel::calc, py::arg("data"), py::arg("x"), py::arg("pi"),
           py::call_guard<py::gil_scoped_release>())
      .def("calc_diff", &IntervalModel::calcDiff, py::arg("data"), py::arg("x"), py::arg("pi"),
           py::call_guard<py::gil_scoped_release>())
      .def("velocity_noise_covariance", [](const IntervalModel& self, const IntervalData& d, const Vec& std_,
                                           double floor) {
        Mat out;
        self.velocityNoiseCovariance(d, std_, floor, out);
        return out;
      })
      .def("velocity_noise_covariance_derivative",
           [](const IntervalModel& self, IntervalData& d, const Vec& q, const Vec& std_) {
             Mat out;
             self.velocityNoiseCovarianceDerivative(d, q, std_, out);
             return out;
           },
           py::arg("data"), py::arg("q"), py::arg("torque_std"),
           "(nv * nv, npi): column j = vec(d(torque-noise covariance)/d pi_j) at the last calc_diff (column-major)");

  py::class_<Solver>(m, "Solver")
      .def(py::init([](const Parametrization& p, const std::string& arrival, double rank_tol, int max_iter,
                       double max_time, double tol_stop, double tol_gap, bool refresh_noise, int threads,
                       bool final_direction) {
             Options o;
             o.arrival = arrival;
             o.rank_tol = rank_tol;
             o.max_iter = max_iter;
             o.max_time = max_time;
             o.tol_stop = tol_stop;
             o.tol_gap = tol_gap;
             o.refresh_noise = refresh_noise;
             o.threads = threads;
             o.final_direction = final_direction;
             return std::make_unique<Solver>(p, o);
           }),
           py::arg("parametrization"), py::arg("arrival") = "auto", py::arg("rank_tol") = 1e-9,
           py::arg("max_iter") = 100, py::arg("max_time") = -1.0, py::arg("tol_stop") = 1e-12,
           py::arg("tol_gap") = 1e-9, py::arg("refresh_noise") = true, py::arg("threads") = 1,
           py::arg("final_direction") = true)
      .def("set_problem",
           [](Solver& s, const std::vector<std::shared_ptr<IntervalModel>>& running,
              const std::shared_ptr<IntervalModel>& terminal, const Vec& x_bar, const Vec& theta_bar, const Mat& H,
              const Vec& g, const Mat& noise_info) {
             py::gil_scoped_release release;  // allocates every knot's data: the node's sensor callbacks keep running
             s.setProblem(asModels(running), terminal, Prior{x_bar, theta_bar, H, g}, noise_info);
           })
      .def("set_knot", &Solver::setKnot, py::arg("k"), py::arg("u") = Vec(), py::arg("z") = Vec())
      .def("set_torque_noise", &Solver::setTorqueNoise, py::arg("torque_std"), py::arg("parametric") = false)
      .def("set_guess", &Solver::setGuess)
      .def("solve", [](Solver& s, int max_iter) {
        Result r;
        {
          py::gil_scoped_release release;
          r = s.solve(max_iter);
        }
        return resultDict(r);
      })
      .def(
          "calc_diff", [](Solver& s) { return s.calcDiff(false); }, py::call_guard<py::gil_scoped_release>(),
          "Linearise every knot at the current estimate (no reuse); returns the total cost.")
      .def("try_step",
           [](Solver& s, double alpha) {
             double gap = 0.0, cost = 0.0;
             {
               py::gil_scoped_release release;
               cost = s.tryStep(alpha, gap);
             }
             return py::make_tuple(cost, gap);
           })
      .def("pinocchio_floor", &Solver::pinocchioFloor, py::call_guard<py::gil_scoped_release>(),
           "Seconds of the Pinocchio calls alone of one iteration (linearisation + one trial), one thread.")
      .def_static("pinocchio_floor_sites", [] { return pinSiteTimesByName(); },
                  "Seconds per Pinocchio call site (its call text) and per timed section (MCOE_TIMED / PinTimer label) "
                  "of the last pinocchio_floor, or accumulated since section_timing(True), on this thread.")
      .def_static(
          "section_timing",
          [](bool on) {
            if (on) pinSiteTimes().clear();
            sectionTiming() = on;
          },
          py::arg("on"),
          "Time the solver's sections (not the single Pinocchio calls) of the following calls on this thread (threads "
          "= 1; on: reset and start, off: stop); read with pinocchio_floor_sites().")
      .def_property(
          "consider", [](const Solver& s) { return s.options.consider; },
          [](Solver& s, bool on) {
            s.options.consider = on;
            s.invalidate();
          },
          "Consider analysis of the IMU biases and the orientation offset (consider_sensitivity, the priors' G); False: "
          "not computed.")
      .def_property(
          "threads", [](const Solver& s) { return s.options.threads; },
          [](Solver& s, int n) { s.options.threads = n; })
      .def_property(
          "spare_knots", [](const Solver& s) { return s.options.spare_knots; },
          [](Solver& s, int n) { s.options.spare_knots = n; },
          "Dropped knots a shift keeps for later shifts' new knots of their models (< 0: one window).")
      .def_property_readonly("spare_count", [](const Solver& s) { return s.spareCount(); })
      .def("request_stop", &Solver::requestStop, "Thread-safe: stop the running/next solve before its line search.")
      .def("clear_stop", &Solver::clearStop)
      .def_property_readonly("stop_requested", &Solver::stopRequested)
      .def("compute_direction",
           [](Solver& s, double reg) {
             double d1 = 0, d2 = 0;
             std::string method;
             {
               py::gil_scoped_release release;
               s.computeDirection(reg, d1, d2, method);
             }
             return py::make_tuple(d1, d2, method);
           })
      .def("shift",
           [](Solver& s, int k, const std::vector<std::shared_ptr<IntervalModel>>& running,
              const std::shared_ptr<IntervalModel>& terminal, const std::vector<Vec>& us, const std::vector<Vec>& zs,
              const Vec& u_terminal, const Vec& z_terminal, const Mat& noise_info) {
             py::gil_scoped_release release;
             s.shift(k, asModels(running), terminal, us, zs, u_terminal, z_terminal, noise_info);
           })
      .def("marginal_prior",
           [](Solver& s, int k, bool relinearize) {
             Prior p;
             {
               py::gil_scoped_release release;
               p = s.marginalPrior(k, relinearize);
             }
             return py::make_tuple(p.x_bar, p.theta_bar, p.H, p.g, p.G);
           })
      .def("terminal_covariance", &Solver::terminalCovariance, py::call_guard<py::gil_scoped_release>())
      .def_readonly("consider_sensitivity", &Solver::considerSensitivity,
                    "d(x_N, theta)/db (ndx + ntheta, 9) of the last terminal_covariance: b = the IMU biases (gyro, "
                    "accelerometer) of the readings that do not estimate theirs, the orientation reading's offset "
                    "(consider analysis).")
      .def_property(
          "prior",
          [](const Solver& s) {
            return py::make_tuple(s.prior.x_bar, s.prior.theta_bar, s.prior.H, s.prior.g, s.prior.G);
          },
          [](Solver& s, const py::tuple& t) {
            // (x_bar, theta_bar, H, g[, G]): G (ndx + ntheta, 9) the gradient's consider sensitivity, absent = zeros
            Mat sens = t.size() > 4 && !t[4].is_none() ? t[4].cast<Mat>() : Mat();
            s.setPrior(Prior{t[0].cast<Vec>(), t[1].cast<Vec>(), t[2].cast<Mat>(), t[3].cast<Vec>(), sens});
          })
      .def_property_readonly("N", &Solver::N)
      .def_property_readonly("ndx", &Solver::ndx)
      .def_property_readonly("nw", &Solver::nw)
      .def_property_readonly("ntheta", &Solver::ntheta)
      .def_property(
          "xs", [](const Solver& s) { return s.xs; },
          [](Solver& s, const std::vector<Vec>& v) { s.xs = v; s.invalidate(); })
      .def_property(
          "ws", [](const Solver& s) { return s.ws; },
          [](Solver& s, const std::vector<Vec>& v) { s.ws = v; s.invalidate(); })
      .def_property(
          "theta", [](const Solver& s) { return s.theta; },
          [](Solver& s, const Vec& v) { s.theta = v; s.invalidate(); })
      .def_readonly("pi", &Solver::pi)
      .def_readonly("dtheta", &Solver::dtheta)
      .def_readonly("dx", &Solver::dx)
      .def_readonly("dw", &Solver::dw)
      .def("knot_data", [](Solver& s, int k) -> IntervalData& { return *s.knot(k).data; },
           py::return_value_policy::reference_internal)
      .def("knot_trial", [](Solver& s, int k) -> IntervalData& { return *s.knot(k).trial; },
           py::return_value_policy::reference_internal, "Knot k's line-search trial data (the last try_step's calc).")
      .def("knot_W", [](const Solver& s, int k) { return s.knot(k).W; })
      .def("knot_noise_terms",
           [](const Solver& s, int k) -> py::object {
             const Knot& kn = s.knot(k);
             if (!kn.has_dW) return py::none();
             return py::make_tuple(kn.lth, kn.Lwth, kn.Lthth);
           },
           "Parametric noise terms (lth, Lwth, Lthth) of interval k, None if not set.")
      .def("knot_noise_info", [](const Solver& s, int k) { return s.knot(k).w0; },
           "Constant diagonal velocity-noise information (nv,) of interval k (W without the torque-noise model).")
      .def_property(
          "timings",
          [](const Solver& s) {
            const Timings& t = s.timings;
            py::dict d;
            d["linearize"] = t.linearize;
            d["direction"] = t.direction;
            d["line_search"] = t.line_search;
            d["relinearize"] = t.relinearize;
            d["shift"] = t.shift;
            d["covariance"] = t.covariance;
            d["knots_allocated"] = t.knots_allocated;
            return d;
          },
          [](Solver& s, py::none) { s.timings = Timings(); },
          "Wall time (s) per solver phase since the last reset (assign None to reset) and the knots allocated.");
}
