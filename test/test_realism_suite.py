"""benchmarks/realism_suite.py: the trunk-only mismatch profiles and the no-phantom acceptance check."""

import os

import pytest

from mcoe_ros.sim.cli import build_parser, config_from_args

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def suite(benchmark_module):
    return benchmark_module("realism_suite")


def test_trunk_only_profiles_are_the_all_links_profiles_with_the_legs_at_the_urdf(suite):
    for direction in ("lighter", "heavier"):
        configs = {}
        for profile in (direction, f"trunk-{direction}"):
            argv = ["--scenario", "stand:1", *suite.PROFILES[profile], "--seed", str(suite.SEED), "--out", "x"]
            configs[profile] = config_from_args(build_parser().parse_args(argv))
        every, trunk = configs[direction].mismatch, configs[f"trunk-{direction}"].mismatch
        assert (every.links, trunk.links) == ("all", "trunk")
        assert suite.MISMATCH_PROFILES[direction] == "all" and suite.MISMATCH_PROFILES[f"trunk-{direction}"] == "trunk"
        # everything else (noise, losses, feet, magnitude, direction, seed) is the same robot
        assert (every.scale, every.direction, every.com_offset, every.seed) == (
            trunk.scale,
            trunk.direction,
            trunk.com_offset,
            trunk.seed,
        )
        assert configs[direction].noise == configs[f"trunk-{direction}"].noise
        assert configs[direction].losses == configs[f"trunk-{direction}"].losses
        assert configs[direction].contact == configs[f"trunk-{direction}"].contact
    names = {c.name for c in suite.full_cases()}
    assert {"stand_none_trunk-lighter_3s", "stand_none_trunk-heavier_3s", "stand_none_real_3s"} <= names
    assert {"squat-sway_3kg_trunk-lighter_4s", "squat-sway_3kg_trunk-heavier_4s"} <= names


@pytest.mark.parametrize(
    "profile, error_kg, verdict, label",
    [
        ("trunk-lighter", 0.033, "PASS", "trunk only differs"),
        ("trunk-heavier", -0.15, "FAIL", "trunk only differs"),
        ("lighter", 0.05, "PASS", "legs -0.552 kg"),
        ("heavier", 0.51, "FAIL", "legs -0.552 kg"),
        ("real", 0.031, "PASS", "nominal URDF"),
    ],
)
def test_no_phantom_check_compares_the_published_payload_with_the_trunk_deviation(
    suite, profile, error_kg, verdict, label
):
    case = suite.Case("stand", "none", profile, 3.0)
    res = {"OE": suite.Result(mass_err_kg=error_kg)}
    text = suite.render_verdict([(case, -0.38, -0.552, False, res)], no_models=True)
    line = text.splitlines()[1]
    assert f"published payload {-0.38 + error_kg:+.3f} kg vs trunk deviation -0.380 kg" in line
    assert label in line and line.endswith(f"-> {verdict} (<= 0.1 kg)")


def test_round_feet_and_soft_floor_split_the_feet_profile(suite):
    """The two halves of ``feet`` (docs/localisation.md, session 19): each changes one contact property of the clean
    robot, and together they are ``feet``'s contact."""
    import dataclasses

    def contact(profile):
        argv = ["--scenario", "stand:1", *suite.PROFILES[profile], "--seed", str(suite.SEED), "--out", "x"]
        cfg = config_from_args(build_parser().parse_args(argv))
        return cfg, cfg.contact

    (clean_cfg, clean), (_, feet) = contact("clean"), contact("feet")
    (round_cfg, round_feet), (floor_cfg, soft_floor) = contact("round-feet"), contact("soft-floor")
    assert round_feet == dataclasses.replace(clean, foot_condim=feet.foot_condim) != clean
    assert soft_floor == dataclasses.replace(clean, solref=feet.solref) != clean
    assert feet == dataclasses.replace(clean, foot_condim=feet.foot_condim, solref=feet.solref)
    for cfg in (round_cfg, floor_cfg):
        assert (cfg.noise, cfg.losses) == (clean_cfg.noise, clean_cfg.losses)
    # real on the clean profile's floor: everything else is real's
    (real_cfg, real), (hard_cfg, hard) = contact("real"), contact("hard-floor")
    assert hard == dataclasses.replace(real, solref=clean.solref) != real
    assert (hard_cfg.noise, hard_cfg.losses) == (real_cfg.noise, real_cfg.losses)


def test_profile_option_runs_the_real_cases_on_another_floor(suite):
    real = suite.select_cases(False, "squat-sway_5kg-off_real,walk_5kg-off_real,squat-sway_5kg-off_clean")
    assert sorted(c.name for c in real) == [
        "squat-sway_5kg-off_clean_4s",
        "squat-sway_5kg-off_real_4s",
        "walk_5kg-off_real_4s",
    ]
    hard = suite.select_cases(False, "squat-sway_5kg-off_real,walk_5kg-off_real,squat-sway_5kg-off_clean", "hard-floor")
    assert sorted(c.name for c in hard) == ["squat-sway_5kg-off_hard-floor_4s", "walk_5kg-off_hard-floor_4s"]
    with pytest.raises(ValueError, match="unknown profile 'marble'"):
        suite.select_cases(True, "", "marble")


def test_identification_table_has_the_tracked_biases_and_the_models_only_when_run(suite):
    case = suite.select_cases(False, "walk_5kg-off_real")[0]
    meta = {
        "gyro_bias_mean": [0.021, -0.026, 0.004],
        "acc_bias_mean": [0.01, 0.02, -0.03],
        "actuator_losses": {
            "viscous_Nms_per_rad": [1.0, 1.5, 2.0],
            "coulomb_Nm": [0.2, 0.2, 0.2],
            "rotor_inertia_kgm2": [0.01, 0.01, 0.01],
        },
    }
    oe = {"gyro_bias_tracked": [0.017, -0.018, 0.0, 0.0044, 0.0044, 0.0102], "accel_bias_z_tracked": [-0.027, 0.012]}
    plain = suite.render_ident([(case, meta, oe, None)]).splitlines()
    assert plain[0].count("|") == 4 and "OE+m" not in plain[0]
    assert "(21.0, -26.0, 4.0) / (17.0, -18.0, 0.0) ± (4.4, 4.4, 10.2) | -0.030 / -0.027 ± 0.012 |" in plain[2]
    models = {"imu_bias": [0.02, -0.025, 0.003, 0.0, 0.0, 0.0], "actuator": {"viscous_hip": 1.1}}
    full = suite.render_ident([(case, meta, oe, models)]).splitlines()
    assert "OE+m gyro" in full[0] and full[0].count("|") == full[2].count("|") == 9
    assert "(20.0, -25.0, 3.0)" in full[2]
