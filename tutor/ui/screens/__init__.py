"""The app's screens: home (device + lessons + progress), lesson, help, review, profile, roofline."""
